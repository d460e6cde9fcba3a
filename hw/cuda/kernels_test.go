package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda/internal/ptxgen"
)

// TestPTXUpToDate regenerates the PTX and compares it with the embedded,
// checked-in kernels.ptx.
func TestPTXUpToDate(t *testing.T) {
	if got := ptxgen.Generate(); got != kernelsPTX {
		t.Fatal("kernels.ptx is stale: run `go generate ./hw/cuda` and commit the result")
	}
}

// TestPTXHasEveryKernel checks that the module has an entry for every
// dtype × op, a divide for every dtype and the copy, and that its header
// is what the driver and the arithmetic contract need.
func TestPTXHasEveryKernel(t *testing.T) {
	var names []string
	for _, dt := range hw.DTypes() {
		for _, op := range []hw.ReduceOp{hw.Sum, hw.Prod, hw.Min, hw.Max} {
			names = append(names, ptxgen.ReduceName(op, dt))
		}
		names = append(names, ptxgen.DivideName(dt))
	}
	names = append(names, ptxgen.CopyName)
	if len(ptxgen.Kernels()) != len(names) {
		t.Errorf("ptxgen lists %d kernels, want %d", len(ptxgen.Kernels()), len(names))
	}
	for _, n := range names {
		if strings.Count(kernelsPTX, ".visible .entry "+n+"(") != 1 {
			t.Errorf("kernels.ptx has no single entry %s", n)
		}
	}
	for _, want := range []string{".version 7.0\n", ".target sm_80\n", ".address_size 64\n"} {
		if !strings.Contains(kernelsPTX, want) {
			t.Errorf("kernels.ptx lacks %q", want)
		}
	}
	// No flush to zero, no approximate or fused arithmetic, anywhere.
	for _, bad := range []string{".ftz", ".approx", ".full", "fma.", "mad.f", "mad.rn"} {
		if strings.Contains(kernelsPTX, bad) {
			t.Errorf("kernels.ptx uses %s", bad)
		}
	}
}

// TestPTXAssembles runs NVIDIA's ptxas on the module for sm_80 and sm_90
// when it is installed (PATH, or COMMSIM_PTXAS naming the binary): it
// catches PTX the driver's JIT would refuse without needing a GPU.
func TestPTXAssembles(t *testing.T) {
	ptxas := os.Getenv("COMMSIM_PTXAS")
	if ptxas == "" {
		var err error
		if ptxas, err = exec.LookPath("ptxas"); err != nil {
			t.Skip("ptxas not found (install the CUDA toolkit or set COMMSIM_PTXAS)")
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "kernels.ptx")
	if err := os.WriteFile(src, []byte(kernelsPTX), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"sm_80", "sm_90"} {
		out, err := exec.Command(ptxas, "-arch="+arch, "-o", filepath.Join(dir, arch+".cubin"), src).CombinedOutput()
		if err != nil {
			t.Errorf("ptxas -arch=%s: %v\n%s", arch, err, out)
		} else if len(out) > 0 {
			t.Errorf("ptxas -arch=%s warns:\n%s", arch, out)
		}
	}
}

// TestNoDriverError checks that a machine without the driver gets the
// documented error from every entry point, naming the library.
func TestNoDriverError(t *testing.T) {
	if Available() == nil {
		t.Skip("the CUDA driver is present here")
	}
	_, _, err := NewWorld(2, Virtual)
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("NewWorld without a driver: %v", err)
	}
	if !strings.Contains(err.Error(), "libcuda.so.1") && !strings.Contains(err.Error(), "needs Linux") {
		t.Errorf("error does not name the library: %v", err)
	}
	if _, _, err := NewWorldOn([]int{0}); !errors.Is(err, ErrNoDriver) {
		t.Errorf("NewWorldOn without a driver: %v", err)
	}
	t.Logf("without a driver: %v", err)
}
