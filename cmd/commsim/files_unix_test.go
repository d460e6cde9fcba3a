//go:build unix

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteFileAtomicWritesPipesInPlace: a pipe (or a device) is written,
// not replaced by a regular file.
func TestWriteFileAtomicWritesPipesInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip(err)
	}
	got := make(chan string)
	go func() {
		data, _ := readFileAtMost(path, 1<<10, path)
		got <- string(data)
	}()
	if err := writeFileAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "through the pipe"); return err }); err != nil {
		t.Fatal(err)
	}
	if data := <-got; data != "through the pipe" {
		t.Fatalf("the reader got %q", data)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the pipe was replaced: %v %v", fi, err)
	}
	// /dev/stdout and /dev/fd/N are links to whatever the descriptor holds,
	// a regular file too: written in place, never renamed over.
	for path, want := range map[string]bool{"/dev/stdout": true, "/dev/fd/3": true, "/proc/self/fd/1": true, filepath.Join(t.TempDir(), "x.json"): false} {
		if isStream(path) != want {
			t.Errorf("isStream(%q) = %v", path, !want)
		}
	}
}

// TestSignalRemovesThePartialFile runs this test binary as a commsim that
// is writing a file when SIGTERM or SIGINT arrives: it exits with the
// shell's status for the signal, and leaves the old file as it was and no
// temporary file.
func TestSignalRemovesThePartialFile(t *testing.T) {
	if dir := os.Getenv("COMMSIM_TEST_WRITE_UNTIL_SIGNAL"); dir != "" {
		exitOnSignalWithoutPartialFiles()
		writeFileAtomic(filepath.Join(dir, "trace.json"), func(w io.Writer) error {
			io.WriteString(w, "{\"traceEvents\":[")
			select {} // until the signal
		})
		os.Exit(0)
	}
	for sig, status := range map[syscall.Signal]int{syscall.SIGTERM: 143, syscall.SIGINT: 130} {
		if signal.Ignored(sig) {
			continue // inherited (a background job's SIGINT): the child would ignore it too
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "trace.json"), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRemovesThePartialFile$")
		cmd.Env = append(os.Environ(), "COMMSIM_TEST_WRITE_UNTIL_SIGNAL="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		for len(dirEntries(t, dir)) < 2 { // until the temporary file is there
			select {
			case err := <-exited:
				t.Fatalf("exited before the signal: %v", err)
			default:
				time.Sleep(time.Millisecond)
			}
		}
		cmd.Process.Signal(sig)
		err := <-exited
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != status {
			t.Errorf("%v: %v, want exit status %d", sig, err, status)
		}
		if names := dirEntries(t, dir); !slices.Equal(names, []string{"trace.json"}) {
			t.Errorf("%v left %q", sig, names)
		}
		if data, _ := os.ReadFile(filepath.Join(dir, "trace.json")); string(data) != "old\n" {
			t.Errorf("%v: trace.json = %.40q", sig, data)
		}
	}
}

// A finished temporary file is never renamed over what is no regular
// file, even where writeFileAtomic's stream check (isStream) is passed
// by: a pipe stays a pipe, and the temporary file is gone. A mutation of
// that check once renamed a file over /dev/full.
func TestCommitNeverReplacesAPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	tmp, err := partialFiles.create(dir, ".pipe.*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	err = partialFiles.commit(tmp.Name(), fifo)
	if err == nil || !strings.Contains(err.Error(), "is no regular file") {
		t.Errorf("commit over a pipe: %v, want a refusal", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe after: %v, %v", fi, err)
	}
	if _, err := os.Stat(tmp.Name()); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
}

// A path that names one of the process's descriptors is written through
// that descriptor, where the shell left it: `--trace /dev/stderr 2>>log`
// appends to log and `-J /dev/fd/N` continues at N's offset, where opening
// the path anew would write over the file from its start. A descriptor
// that is not open is a usage error before the run.
func TestDescriptorPathsWriteWhereTheShellPointedThem(t *testing.T) {
	if _, err := os.Stat("/dev/fd"); err != nil {
		t.Skip("no /dev/fd here")
	}
	path := filepath.Join(t.TempDir(), "log.txt")
	if err := os.WriteFile(path, []byte("earlier lines\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	appending, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer appending.Close()
	for _, p := range []string{"/dev/fd/", "/proc/self/fd/"} {
		fdPath := p + strconv.Itoa(int(appending.Fd()))
		if _, err := os.Stat(fdPath); err != nil {
			continue
		}
		if err := writeFileAtomic(fdPath, func(w io.Writer) error { _, err := io.WriteString(w, "from "+p+"\n"); return err }); err != nil {
			t.Fatalf("%s: %v", fdPath, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(data), "earlier lines\nfrom /dev/fd/\n") {
		t.Errorf("the appended file holds %q (%v), want its earlier lines, then the writes", data, err)
	}
	if _, isDescriptor := descriptorOf("/dev/fd/3x"); isDescriptor {
		t.Error("/dev/fd/3x read as a descriptor")
	}

	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	unopened := min(limit.Cur-1, 1<<20) // the highest descriptor this process may open: none of its files holds it
	status, _, errOut := commsim("bench", "--topo", "ring:4", "-b", "64", "-e", "64", "--trace", "/dev/fd/"+strconv.FormatUint(unopened, 10))
	if status != 2 || !strings.Contains(errOut, "is not open") {
		t.Errorf("--trace to a closed descriptor: status %d, stderr %q, want 2 and a reason", status, errOut)
	}
}
