//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// openDescriptor opens a copy of the descriptor that path names, where it
// names one (see descriptorOf): its writes share the descriptor's offset
// and its append mode, as the shell set them up.
func openDescriptor(path string) (*os.File, bool, error) {
	fd, ok := descriptorOf(path)
	if !ok {
		return nil, false, nil
	}
	syscall.ForkLock.RLock()
	dup, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(dup)
	}
	syscall.ForkLock.RUnlock()
	if err == syscall.EBADF {
		return nil, true, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("descriptor %d is not open", fd)}
	}
	if err != nil {
		return nil, true, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("descriptor %d: %w", fd, err)}
	}
	return os.NewFile(uintptr(dup), path), true, nil
}

// descriptorOf is the descriptor number that path names: /dev/stdout,
// /dev/stderr, /dev/fd/N or /proc/self/fd/N.
func descriptorOf(path string) (int, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, false
	}
	switch abs {
	case "/dev/stdout":
		return 1, true
	case "/dev/stderr":
		return 2, true
	}
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/"} {
		if n, ok := strings.CutPrefix(abs, dir); ok {
			fd, err := strconv.Atoi(n)
			return fd, err == nil && fd >= 0 && strconv.Itoa(fd) == n
		}
	}
	return 0, false
}
