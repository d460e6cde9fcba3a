package metal

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// TestMSLOnHostCompiler compiles kernels.metal itself, unchanged, with the
// host's C++ compiler (MSL is C++14 with extensions; testdata/mslhost has a
// stand-in <metal_stdlib> for the few it uses) and runs the same test
// vectors as TestMirrorKernels through it. The mirror is a hand port; this
// runs the actual kernel text, so a slip in translating between the two,
// or an MSL expression that does not mean what it was meant to (integer
// promotion, a ternary's operand types, a conversion), shows up here. What
// it cannot show is how Metal's compiler and GPU treat the same source: that
// is TestMetalKernels, on a Mac. It skips where there is no C++ compiler
// with _Float16 (g++ 12+, clang 15+).
func TestMSLOnHostCompiler(t *testing.T) {
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "c++"
	}
	if _, err := exec.LookPath(cxx); err != nil {
		t.Skipf("no C++ compiler (%s) to compile kernels.metal on the host: %v", cxx, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "table.inc"), []byte(hostKernelTable()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kernels")
	build := exec.Command(cxx, "-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math",
		"-Wall", "-Wno-attributes", "-Wno-unused-function",
		"-I", "testdata/mslhost", "-I", ".", "-I", dir, "-o", bin, "testdata/mslhost/driver.cpp")
	if out, err := build.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "_Float16") {
			t.Skipf("%s has no _Float16, which stands in for MSL's half: %s", cxx, out)
		}
		t.Fatalf("kernels.metal does not compile as C++ with %s: %v\n%s", cxx, err, out)
	} else if len(out) > 0 {
		t.Logf("compiler output:\n%s", out)
	}
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Write(make([]byte, 4)) // name length 0: exit
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("kernel driver: %v", err)
		}
	}()
	w, r := bufio.NewWriter(stdin), bufio.NewReader(stdout)
	checkKernels(t, func(t *testing.T, name string, d, s []byte, p kernelParams) {
		t.Helper()
		req := le.AppendUint32(nil, uint32(len(name)))
		req = append(req, name...)
		req = append(req, unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p))...)
		req = le.AppendUint64(req, uint64(len(d)))
		req = append(req, d...)
		req = le.AppendUint64(req, uint64(len(s)))
		req = append(req, s...)
		if _, err := w.Write(req); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, d); err != nil {
			t.Fatalf("kernel driver, %s: %v", name, err)
		}
	})
}

// hostKernelTable is the C++ table from kernel names to functions that run
// the kernel's threads 0 … p.n-1 one after another.
func hostKernelTable() string {
	elem := map[int]string{1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}
	var b strings.Builder
	for _, name := range kernelNames {
		k := mirrorKernels[name]
		typ := elem[k.width]
		call := fmt.Sprintf("%s((%s*)d, (const %s*)s, p, i)", name, typ, typ)
		if strings.HasPrefix(name, "divide_") {
			call = fmt.Sprintf("%s((%s*)d, p, i)", name, typ)
		}
		fmt.Fprintf(&b, "{%q, [](void* d, const void* s, Params& p) { (void)s; for (uint i = 0; i < p.n; i++) %s; }},\n", name, call)
	}
	return b.String()
}
