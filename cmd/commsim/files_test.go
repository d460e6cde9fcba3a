package main

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dirEntries lists dir's file names, sorted.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// writeFailing writes part of a file, then fails.
func writeFailing(w io.Writer) error {
	io.WriteString(w, strings.Repeat("partial ", 100<<10)) // past the buffer: bytes reach the disk
	return errDiskFull
}

func TestWriteFileAtomicFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.json")
	if err := writeFileAtomic(path, writeFailing); !errors.Is(err, errDiskFull) {
		t.Fatalf("err = %v, want the write's", err)
	}
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Fatalf("a failed write left %q", names)
	}
}

func TestWriteFileAtomicFailureKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fitted.yaml")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(path, writeFailing); !errors.Is(err, errDiskFull) {
		t.Fatalf("err = %v, want the write's", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "old\n" {
		t.Fatalf("a failed write clobbered the file: %.40q", data)
	}
	if names := dirEntries(t, dir); !slices.Equal(names, []string{"fitted.yaml"}) {
		t.Fatalf("a failed write left %q", names)
	}
}

// TestWriteFileAtomicInterruptLeavesNothing: a signal in the middle of a
// write (the handler calls interrupt) removes the temporary file, and the
// write that goes on afterwards renames nothing into place.
func TestWriteFileAtomicInterruptLeavesNothing(t *testing.T) {
	defer func() { partialFiles.interrupted = false }()
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "new.json"), old} {
		partialFiles.interrupted = false
		err := writeFileAtomic(path, func(w io.Writer) error {
			io.WriteString(w, "{\"traceEvents\":[")
			partialFiles.interrupt()
			_, err := io.WriteString(w, "]}\n")
			return err
		})
		if !errors.Is(err, errInterrupted) {
			t.Errorf("%s: err = %v, want %v", path, err, errInterrupted)
		}
	}
	// A write that starts after the signal, before the process exits, is
	// refused as well.
	if err := writeFileAtomic(filepath.Join(dir, "late.json"), func(w io.Writer) error { return nil }); !errors.Is(err, errInterrupted) {
		t.Errorf("a write after the interrupt: err = %v", err)
	}
	if names := dirEntries(t, dir); !slices.Equal(names, []string{"old.json"}) {
		t.Fatalf("an interrupted write left %q", names)
	}
	if data, _ := os.ReadFile(old); string(data) != "old\n" {
		t.Fatalf("an interrupted write clobbered the file: %q", data)
	}
}

// TestWriteFileAtomicReplacesWholeAndFollowsLinks: a complete write
// replaces the file a link names, with its permissions, keeps the link,
// and leaves no temporary file.
func TestWriteFileAtomicReplacesWholeAndFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.yaml")
	link := filepath.Join(dir, "link.yaml")
	if err := os.WriteFile(real, []byte("a much longer old content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.yaml", link); err != nil {
		t.Skip(err)
	}
	if err := os.Chmod(real, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(link, func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(real); string(data) != "new\n" {
		t.Fatalf("real.yaml = %q", data)
	}
	if fi, err := os.Stat(real); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the replaced file's permissions: %v %v, want 0600 kept", fi.Mode(), err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	if names := dirEntries(t, dir); !slices.Equal(names, []string{"link.yaml", "real.yaml"}) {
		t.Fatalf("left %q", names)
	}
}

// TestTraceFileIsCompleteAndAlone: --trace replaces an existing file with
// a whole trace and leaves nothing else beside it.
func TestTraceFileIsCompleteAndAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "step.json")
	if err := os.WriteFile(path, []byte(strings.Repeat("stale ", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	status, _, errOut := commsim("train", "--model", "gpt2-small", "--topo", "switch:4", "--trace", path)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		Events []json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &trace); err != nil || len(trace.Events) == 0 {
		t.Fatalf("the trace is not whole JSON (%d bytes): %v", len(data), err)
	}
	if names := dirEntries(t, dir); !slices.Equal(names, []string{"step.json"}) {
		t.Fatalf("left %q", names)
	}
}

// TestFileWriteFailureIsARuntimeError: --trace and calibrate --out that
// cannot be written when the run is done (/dev/full, whose writes fail
// with ENOSPC; a folder that does not exist, or one where the file would
// go, is a usage error before the run) fail the run (exit 1), naming the
// file.
func TestFileWriteFailureIsARuntimeError(t *testing.T) {
	const full = "/dev/full"
	if _, err := os.Stat(full); err != nil {
		t.Skipf("no %s: %v", full, err)
	}
	log := ncclTestdata + "/sim-dgx-h100-all_reduce.txt"
	for _, args := range [][]string{
		{"train", "--model", "gpt2-small", "--topo", "switch:4", "--trace", full},
		{"what-if", "--topo", "ring:4", "--algo", "ring", "-e", "1KiB", "--timing-only", "--fault", "rank 1 slow 50%", "--trace", full},
		{"bench", "--topo", "ring:4", "--timing-only", "-b", "1KiB", "-e", "1KiB", "--trace", full},
		{"calibrate", "--log", log, "--topo", "dgx-h100", "--algo", "ring", "-b", "16MiB", "-e", "64MiB", "--out", full},
	} {
		status, _, errOut := commsim(args...)
		if status != 1 || !strings.Contains(errOut, full) || !strings.Contains(errOut, "no space left on device") {
			t.Errorf("%q: status %d, stderr %q", args[0], status, errOut)
		}
	}
}

// TestFilesGoThroughTheHelpers keeps the rules of files.go whole: no
// command creates a file but by writeFileAtomic, or reads one whole but
// through a bound.
func TestFilesGoThroughTheHelpers(t *testing.T) {
	banned := map[string]string{
		"os.Create": "writeFileAtomic", "os.WriteFile": "writeFileAtomic", "os.OpenFile": "writeFileAtomic",
		"os.ReadFile": "readFileAtMost", "io.ReadAll": "readAtMost",
	}
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") || src == "files.go" {
			continue
		}
		f, err := parser.ParseFile(fset, src, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if use, bad := banned[pkg.Name+"."+sel.Sel.Name]; bad {
				t.Errorf("%s: %s.%s; use %s", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name, use)
			}
			return true
		})
	}
}

// endless is a stream that never ends, like /dev/zero or a FIFO whose
// writer keeps writing.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.read += int64(len(p))
	return len(p), nil
}

func TestReadAtMostBoundsTheStream(t *testing.T) {
	const limit = 1 << 20
	var r endless
	_, err := readAtMost(&r, limit, "the log")
	if err == nil || err.Error() != "the log is over the limit of 1MiB (1048576 bytes)" {
		t.Fatalf("err = %v", err)
	}
	if r.read > 2*limit {
		t.Fatalf("read %d bytes for a limit of %d", r.read, limit)
	}
	for _, n := range []int{0, limit} {
		data, err := readAtMost(io.LimitReader(&endless{}, int64(n)), limit, "the log")
		if err != nil || len(data) != n {
			t.Fatalf("%d bytes: got %d, %v", n, len(data), err)
		}
	}
}

// TestLogFromADeviceFailsFast: a log that never ends is refused at the
// documented 64 MiB, by calibrate and by fidelity.
func TestLogFromADeviceFailsFast(t *testing.T) {
	skipInRaceRun(t, "64 MiB of zeros read, twice; TestFidelityFormats reads logs under it")
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip(err)
	}
	for _, cmd := range []string{"calibrate", "fidelity"} {
		status, out, errOut := commsim(cmd, "--log", "/dev/zero", "--topo", "dgx-h100")
		if want := "commsim: --log: /dev/zero is over the limit of 64MiB (67108864 bytes)\n"; status != 2 || errOut != want || out != "" {
			t.Errorf("%s: status %d, stderr %q; want 2 and %q", cmd, status, errOut, want)
		}
	}
}
