//go:build linux || darwin

// Package dlfcn opens shared libraries and finds their symbols through
// purego, with the goroutine held on its OS thread for each call.
//
// dlerror's message belongs to the thread whose call failed, and purego
// reads it in a call of its own after dlopen's or dlsym's: a goroutine
// that moved to another thread between the two read that thread's
// message, often none, and the error said nothing of why (about one
// failure in a few hundred, with several goroutines loading at once).
package dlfcn

import (
	"runtime"

	"github.com/ebitengine/purego"
)

// Open is purego.Dlopen(path, RTLD_NOW|RTLD_GLOBAL) on one thread.
func Open(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// Sym is purego.Dlsym on one thread.
func Sym(handle uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(handle, name)
}
