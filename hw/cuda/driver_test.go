package cuda_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw/cuda"
)

// TestDevices lists the GPUs, or checks that their absence is a clear error
// naming the library, and then skips the GPU part with the reason.
func TestDevices(t *testing.T) {
	devs, err := cuda.Devices()
	if err != nil {
		if !errors.Is(err, cuda.ErrNoDriver) || !strings.Contains(err.Error(), "libcuda.so.1") && !strings.Contains(err.Error(), "needs Linux") {
			t.Fatalf("error without a GPU does not say why: %v", err)
		}
		if cuda.Available() == nil {
			t.Fatal("Devices failed but Available says the driver is fine")
		}
		t.Skipf("no CUDA driver here: %v", err)
	}
	if len(devs) == 0 {
		t.Fatal("the driver loads but reports no GPU")
	}
	for _, d := range devs {
		if d.Name == "" || d.MemoryBytes == 0 || d.Major < 1 {
			t.Errorf("device %+v looks wrong", d)
		}
		t.Logf("GPU %d: %s, %d MiB, sm_%d%d", d.Index, d.Name, d.MemoryBytes>>20, d.Major, d.Minor)
	}
	if v, err := cuda.DriverVersion(); err != nil || v < 11000 {
		t.Errorf("driver version %d, %v", v, err)
	}
}
