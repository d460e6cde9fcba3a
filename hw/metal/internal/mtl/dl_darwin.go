package mtl

import (
	"runtime"

	"github.com/ebitengine/purego"
)

// dlopen and dlsym are purego's with the goroutine held on its OS thread:
// dlerror's message belongs to the thread that failed, and purego reads it
// in a call of its own, so a goroutine that moved between the two read
// another thread's, often none.
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(handle uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(handle, name)
}
