package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Files the commands read and write. A file a command writes (--trace,
// --plot, calibrate --out, topo draw --out) appears whole or not at all: it
// is written to a temporary file beside it and renamed into place when
// complete, so a full disk, a failed write or an interrupt never leaves a
// truncated file, and never clobbers the one already there. A file a
// command reads whole is read through a bound on the stream itself, so a
// pipe or a device such as /dev/zero fails fast in bounded memory.

// checkOutputPath refuses, as a usage error, a file that flag asks to
// write in a folder that does not exist, over a folder, or through a
// descriptor that is not open: found before a long run, not after it.
func checkOutputPath(flag, path string) error {
	if path == "" {
		return nil
	}
	if isDir(path) {
		return usagef("%s %s: is a folder, not a file to write", flag, path)
	}
	if f, isDescriptor, err := openDescriptor(path); isDescriptor {
		if err != nil {
			return usagef("%s %s: %v", flag, path, errors.Unwrap(err))
		}
		return f.Close()
	}
	if isStream(path) {
		return nil
	}
	if dir := filepath.Dir(path); !isDir(dir) {
		return usagef("%s %s: there is no folder %s to write it in", flag, path, dir)
	}
	return nil
}

// isDir reports whether path is a folder.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// writeFileAtomic writes path through write, all of it or nothing: on any
// error, and when an interrupt (SIGINT, SIGTERM) arrives before the
// rename, the temporary file is removed and path is left as it was.
//
// A path that is not a regular file (a pipe, a terminal, /dev/stdout) is
// written in place: renaming over it would replace the device rather than
// write to it. A symbolic link is followed, so the file it names is
// replaced and the link kept.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	if isStream(path) {
		return writeStream(path, write)
	}
	target := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real
	}
	tmp, err := partialFiles.create(filepath.Dir(target), "."+filepath.Base(target)+".*.tmp")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot create a file in %s: %w", filepath.Dir(path), err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			partialFiles.remove(tmp.Name())
			err = nameTarget(err, tmp.Name(), path)
		}
	}()
	buf := bufio.NewWriterSize(tmp, 64<<10)
	if err = write(buf); err != nil {
		return err
	}
	if err = buf.Flush(); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if old, err := os.Stat(target); err == nil {
		mode = old.Mode().Perm() // a replaced file keeps its permissions
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return partialFiles.commit(tmp.Name(), target)
}

// isStream says whether path is written as a stream rather than replaced:
// it exists and is no regular file, or it lies under /dev or /proc, where
// /dev/stdout and /dev/fd/N are links to whatever the descriptor holds.
func isStream(path string) bool {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return true
	}
	abs, err := filepath.Abs(path)
	return err == nil && (strings.HasPrefix(abs, "/dev/") || strings.HasPrefix(abs, "/proc/"))
}

// writeStream writes an existing pipe or device in place. A path that
// names one of the process's descriptors (/dev/stdout, /dev/fd/3) writes
// through that descriptor, not a new opening of its file: reopened,
// `2>>log` would be written over from its start.
func writeStream(path string, write func(io.Writer) error) error {
	f, isDescriptor, err := openDescriptor(path)
	if !isDescriptor {
		f, err = os.OpenFile(path, os.O_WRONLY, 0)
	}
	if err != nil {
		return err
	}
	buf := bufio.NewWriterSize(f, 64<<10)
	err = write(buf)
	if err == nil {
		err = buf.Flush()
	}
	return errors.Join(err, f.Close())
}

// nameTarget makes an error about the temporary file name the file the
// user asked for, which is the one they know.
func nameTarget(err error, tmp, target string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == tmp {
		return &fs.PathError{Op: pe.Op, Path: target, Err: pe.Err}
	}
	return err
}

// errInterrupted is a file write cut short by a signal.
var errInterrupted = errors.New("interrupted")

// partialFileSet holds the temporary files being written, for the signal
// handler to remove. Under its lock a temporary file is either renamed
// into place or removed, never both.
type partialFileSet struct {
	mu          sync.Mutex
	names       map[string]bool
	interrupted bool // the process is on its way out: rename nothing more
}

var partialFiles = &partialFileSet{names: map[string]bool{}}

// create makes a temporary file in dir and holds it for the signal
// handler, both under the lock: a signal between the two would otherwise
// exit before the file is known, and leave it behind.
func (s *partialFileSet) create(dir, pattern string) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interrupted {
		return nil, errInterrupted
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	s.names[f.Name()] = true
	return f, nil
}

// remove deletes a temporary file that will not be renamed.
func (s *partialFileSet) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, name)
	os.Remove(name)
}

// commit renames a complete temporary file into place, unless an
// interrupt has removed it.
func (s *partialFileSet) commit(name, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.names[name] {
		return errInterrupted
	}
	delete(s.names, name)
	// Never rename over a device, a pipe or a socket: writeFileAtomic
	// writes those in place (isStream), and were that check ever to miss
	// one, a rename would put a file where /dev/full was (as root, as the
	// tests run). A link left dangling is still replaced, as before.
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
		os.Remove(name)
		return fmt.Errorf("%s is no regular file (%v): not replaced", path, fi.Mode().Type())
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// interrupt deletes every temporary file being written and any started
// later, and refuses to rename them.
func (s *partialFileSet) interrupt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interrupted = true
	for name := range s.names {
		os.Remove(name)
		delete(s.names, name)
	}
}

// exitOnSignalWithoutPartialFiles makes SIGINT and SIGTERM remove the
// files being written before the process exits, with the status a shell
// gives a process killed by the signal (130, 143). Without it Go exits on
// the signal at once and leaves the temporary files behind. A signal the
// process started with ignored (nohup, a background job) stays ignored.
func exitOnSignalWithoutPartialFiles() {
	signals := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(sig) {
			signal.Notify(signals, sig)
		}
	}
	go func() {
		sig := <-signals
		partialFiles.interrupt()
		status := 130
		if sig == syscall.SIGTERM {
			status = 143
		}
		os.Exit(status)
	}()
}

// readFileAtMost reads the file at path whole, refusing one of over limit
// bytes (what names it in the error).
func readFileAtMost(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, limit, what)
}

// readAtMost reads r to its end, or fails once it has read more than limit
// bytes: the bound is on the stream, not on a size that stat reports,
// which pipes and devices do not have.
func readAtMost(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is over the limit of %s (%d bytes)", what, formatBytes(limit), limit)
	}
	return data, nil
}
