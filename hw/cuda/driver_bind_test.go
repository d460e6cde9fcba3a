//go:build linux || darwin

package cuda

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeSymbols is a library's symbol table for bindDriver: every name the
// binding may ask for, minus drop.
func fakeSymbols(drop ...string) (lookup func(string) (uintptr, error), asked *[]string) {
	asked = new([]string)
	table := map[string]uintptr{}
	for i, s := range (&driver{}).symbols() {
		for j, name := range s.names {
			table[name] = uintptr(1000*i + j + 1)
		}
	}
	// Old names the binding must not need.
	table["cuDeviceComputeCapability"] = 99999
	for _, d := range drop {
		delete(table, d)
	}
	return func(name string) (uintptr, error) {
		*asked = append(*asked, name)
		if a, ok := table[name]; ok {
			return a, nil
		}
		return 0, errors.New("undefined symbol: " + name)
	}, asked
}

// The _v2 entry points are bound first, the old names only where the _v2
// is missing and the signature is the same, and the deprecated
// cuDeviceComputeCapability is neither asked for nor needed.
func TestDriverBindsV2First(t *testing.T) {
	register := func(any, uintptr) {}
	lookup, asked := fakeSymbols()
	_, bound, err := bindDriver(lookup, register)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cuEventElapsedTime", "cuStreamDestroy", "cuEventDestroy", "cuDevicePrimaryCtxRelease"} {
		if got := bound[name+"_v2"]; got != name+"_v2" {
			t.Errorf("%s bound as %q, want its _v2", name, got)
		}
	}
	for _, name := range *asked {
		if name == "cuDeviceComputeCapability" {
			t.Error("the binding asked for cuDeviceComputeCapability")
		}
	}

	// A driver without cuEventElapsedTime_v2 (before CUDA 12.8) binds the
	// old name; one without cuDeviceComputeCapability loads.
	lookup, _ = fakeSymbols("cuEventElapsedTime_v2", "cuDeviceComputeCapability")
	if _, bound, err = bindDriver(lookup, register); err != nil || bound["cuEventElapsedTime_v2"] != "cuEventElapsedTime" {
		t.Errorf("without cuEventElapsedTime_v2: bound %q, %v", bound["cuEventElapsedTime_v2"], err)
	}

	// No 32-bit fallback for the allocator: its old name takes a 32-bit
	// pointer.
	lookup, asked = fakeSymbols("cuMemAlloc_v2")
	if _, _, err = bindDriver(lookup, register); err == nil || !strings.Contains(err.Error(), "no symbol cuMemAlloc_v2: undefined symbol") {
		t.Errorf("without cuMemAlloc_v2: %v", err)
	}
	for _, name := range *asked {
		if name == "cuMemAlloc" {
			t.Error("the binding fell back to the 32-bit cuMemAlloc")
		}
	}
	lookup, _ = fakeSymbols("cuEventElapsedTime_v2", "cuEventElapsedTime")
	if _, _, err = bindDriver(lookup, register); err == nil || !strings.Contains(err.Error(), "no symbol cuEventElapsedTime_v2 or cuEventElapsedTime") {
		t.Errorf("without either elapsed-time symbol: %v", err)
	}
}

// Devices reads the compute capability from cuDeviceGetAttribute.
func TestDevicesComputeCapabilityFromAttributes(t *testing.T) {
	_, d := fake()
	var attrs []int32
	dd := *d
	dd.cuDeviceGetAttribute = func(v *int32, attr int32, dev int32) cuResult {
		attrs = append(attrs, attr)
		return d.cuDeviceGetAttribute(v, attr, dev)
	}
	devs, err := dd.devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[1] != (DeviceInfo{Index: 1, Name: "Fake GPU 1", MemoryBytes: 1 << 30, Major: 9, Minor: 0}) {
		t.Errorf("devices %+v", devs)
	}
	if want := []int32{75, 76, 75, 76}; !slices.Equal(attrs, want) {
		t.Errorf("attributes asked %v, want %v", attrs, want)
	}
	dd.cuDeviceGetAttribute = func(v *int32, attr int32, dev int32) cuResult { return fakeInvalidValue }
	if _, err := dd.devices(); err == nil || !strings.Contains(err.Error(), "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)") {
		t.Errorf("a failing attribute: %v", err)
	}
}
