package metal

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/commsim/commsim/hw"
)

// mslKernels are the kernel names kernels.metal defines, one per
// REDUCE/DIVIDE/COPY line, in source order.
func mslKernels(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^(?:REDUCE|DIVIDE|COPY)\((\w+),`).FindAllStringSubmatch(kernelSource, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("found no kernels in kernels.metal")
	}
	return names
}

// TestKernelSourceMatchesTable: the MSL defines exactly the kernels the Go
// side launches, once each, so a name cannot drift on either side.
func TestKernelSourceMatchesTable(t *testing.T) {
	got := mslKernels(t)
	if !slices.Equal(got, kernelNames) {
		t.Errorf("kernels.metal defines\n  %v\nkernels.go launches\n  %v", got, kernelNames)
	}
	if n := strings.Count(kernelSource, "kernel void "); n != 3 {
		t.Errorf("kernels.metal has %d `kernel void` outside the three macros; define kernels with REDUCE, DIVIDE or COPY lines", n-3)
	}
	mirror := make([]string, 0, len(mirrorKernels))
	for name := range mirrorKernels {
		mirror = append(mirror, name)
	}
	slices.Sort(mirror)
	want := slices.Sorted(slices.Values(kernelNames))
	if !slices.Equal(mirror, want) {
		t.Errorf("the Go mirror has kernels\n  %v\nthe table\n  %v", mirror, want)
	}
	for _, dt := range kernelDTypes {
		if k := mirrorKernels[copyKernelName(dt.Size())]; k.width != dt.Size() {
			t.Errorf("copy kernel for %s has width %d", dt, k.width)
		}
		for _, op := range kernelOps {
			if k := mirrorKernels[reduceKernelName(op, dt)]; k.width != dt.Size() {
				t.Errorf("reduce %s %s mirror has width %d", op, dt, k.width)
			}
		}
	}
}

// TestKernelLookups: every dtype x op the Go side can be asked for maps to
// a kernel of the table, f64 is refused with ErrF64, and every kernel of
// the table is reachable.
func TestKernelLookups(t *testing.T) {
	used := map[kernelID]bool{}
	for _, dt := range hw.DTypes() {
		for _, op := range kernelOps {
			k, err := reduceKernel(op, dt)
			if dt == hw.F64 {
				if !errors.Is(err, ErrF64) || !errors.Is(err, hw.ErrBadArgument) {
					t.Errorf("reduce %s f64: err %v, want ErrF64 and hw.ErrBadArgument", op, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("reduce %s %s: %v", op, dt, err)
			}
			used[k] = true
		}
		k, err := divideKernel(dt)
		if dt == hw.F64 {
			if !errors.Is(err, ErrF64) {
				t.Errorf("divide f64: err %v, want ErrF64", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("divide %s: %v", dt, err)
		}
		used[k] = true
		if k, err = copyKernel(dt); err != nil {
			t.Errorf("copy %s: %v", dt, err)
		}
		used[k] = true
	}
	for i, name := range kernelNames {
		if !used[kernelID(i)] {
			t.Errorf("kernel %s is in the table but nothing launches it", name)
		}
	}
	if _, err := reduceKernel(hw.Avg, hw.F32); err == nil {
		t.Error("reduce avg has a kernel; Avg is Sum then divide")
	}
}

// TestKernelParamsLayout: the Go struct bound with setBytes has the MSL
// struct's layout.
func TestKernelParamsLayout(t *testing.T) {
	var p kernelParams
	got := []uintptr{unsafe.Offsetof(p.N), unsafe.Offsetof(p.QF), unsafe.Offsetof(p.QI), unsafe.Offsetof(p.DOff), unsafe.Offsetof(p.SOff), unsafe.Sizeof(p)}
	if want := []uintptr{0, 4, 8, 16, 20, 24}; !slices.Equal(got, want) {
		t.Errorf("kernelParams offsets and size %v, want %v", got, want)
	}
	m := regexp.MustCompile(`(?s)struct Params \{(.*?)\};`).FindStringSubmatch(kernelSource)
	if m == nil {
		t.Fatal("kernels.metal has no struct Params")
	}
	var fields []string
	for _, f := range regexp.MustCompile(`(\w+) (\w+);`).FindAllStringSubmatch(m[1], -1) {
		fields = append(fields, f[1]+" "+f[2])
	}
	if want := []string{"uint n", "uint qf", "ulong qi", "uint doff", "uint soff"}; !slices.Equal(fields, want) {
		t.Errorf("MSL Params fields %v, want %v", fields, want)
	}
}

// TestMirrorIsParallel: every helper function of kernels.metal has a Go
// mirror of the same name in Go's case (f16_widen is f16Widen), so the
// port stays function for function.
func TestMirrorIsParallel(t *testing.T) {
	src, err := os.ReadFile("mirror_test.go")
	if err != nil {
		t.Fatal(err)
	}
	goFuncs := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^func (\w+)\(`).FindAllStringSubmatch(string(src), -1) {
		goFuncs[m[1]] = true
	}
	helpers := regexp.MustCompile(`(?m)^static inline \w+ (\w+)\(`).FindAllStringSubmatch(kernelSource, -1)
	if len(helpers) < 40 {
		t.Fatalf("found only %d helper functions in kernels.metal", len(helpers))
	}
	for _, m := range helpers {
		if name := camel(m[1]); !goFuncs[name] {
			t.Errorf("MSL function %s has no Go mirror %s in mirror_test.go", m[1], name)
		}
	}
}

func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}
