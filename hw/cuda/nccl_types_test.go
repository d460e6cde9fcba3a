package cuda

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/commsim/commsim/hw"
)

// The enum values are nccl.h's; a wrong one reduces the wrong type or with
// the wrong op without any error, so they are pinned here.
func TestNCCLEnums(t *testing.T) {
	wantType := map[hw.DType]int32{hw.U8: 1, hw.I32: 2, hw.I64: 4, hw.F16: 6, hw.F32: 7, hw.F64: 8, hw.BF16: 9}
	for _, dt := range hw.DTypes() {
		got, err := ncclDataType(dt)
		if want, ok := wantType[dt]; !ok || err != nil || got != want {
			t.Errorf("%v → %d, %v; want %d", dt, got, err, want)
		}
	}
	if _, err := ncclDataType(0); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("invalid dtype: %v", err)
	}
	wantOp := map[hw.ReduceOp]int32{hw.Sum: 0, hw.Prod: 1, hw.Max: 2, hw.Min: 3, hw.Avg: 4}
	for _, op := range hw.ReduceOps() {
		got, err := ncclRedOp(op, hw.F32)
		if err != nil || got != wantOp[op] {
			t.Errorf("%v → %d, %v; want %d", op, got, err, wantOp[op])
		}
	}
	if _, err := ncclRedOp(hw.Avg, hw.U8); err != nil {
		t.Errorf("avg on u8: %v", err)
	}
	for _, dt := range []hw.DType{hw.I32, hw.I64} {
		if _, err := ncclRedOp(hw.Avg, dt); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "use sum, then divide") {
			t.Errorf("avg on %v: %v", dt, err)
		}
	}
	if _, err := ncclRedOp(0, hw.F32); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("invalid op: %v", err)
	}
}

// The by-value argument must have C's layout: 128 bytes, no padding.
func TestNCCLUniqueIDLayout(t *testing.T) {
	var a ncclUniqueIDArg
	if unsafe.Sizeof(a) != 128 || unsafe.Alignof(a) != 1 || unsafe.Sizeof(NCCLUniqueID{}) != NCCLUniqueIDBytes {
		t.Fatalf("ncclUniqueIDArg is %d bytes aligned %d", unsafe.Sizeof(a), unsafe.Alignof(a))
	}
}

// Two ranks on one GPU are refused before NCCL is even loaded, so this runs
// everywhere.
func TestNCCLInitAllRefusesDuplicateGPUs(t *testing.T) {
	_, err := NCCLInitAll([]int{0, 1, 0})
	if !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "ranks 0 and 2 are both on GPU 0: NCCL refuses two ranks on one GPU; use one GPU per rank") {
		t.Fatalf("got %v", err)
	}
	for _, devs := range [][]int{nil, {-1}} {
		if _, err := NCCLInitAll(devs); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("devices %v: %v", devs, err)
		}
	}
}

func TestNCCLInitRanksChecksRanks(t *testing.T) {
	var id NCCLUniqueID
	for _, tc := range []struct {
		nranks int
		ranks  []int
		set    func(int) error
		want   string
	}{
		{0, []int{0}, nil, "0 ranks"},
		{2, nil, nil, "no ranks"},
		{4, []int{4}, nil, "rank 4 is out of range [0, 4)"},
		{4, []int{1, 1}, func(int) error { return nil }, "rank 1 listed twice"},
		{4, []int{0, 1}, nil, "need setDevice"},
	} {
		_, err := NCCLInitRanks(id, tc.nranks, tc.ranks, tc.set)
		if !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d ranks %v: got %v, want %q", tc.nranks, tc.ranks, err, tc.want)
		}
	}
}

func TestNCCLMissingLibraryIsAnError(t *testing.T) {
	err := NCCLAvailable()
	if err == nil {
		t.Skip("NCCL is installed here")
	}
	if !errors.Is(err, ErrNoNCCL) || !strings.Contains(err.Error(), "native collectives need NCCL") {
		t.Fatalf("error without NCCL does not say why: %v", err)
	}
	if _, err := NCCLGetUniqueID(); !errors.Is(err, ErrNoNCCL) {
		t.Errorf("NCCLGetUniqueID: %v", err)
	}
	if _, err := NCCLInitAll([]int{0}); !errors.Is(err, ErrNoNCCL) {
		t.Errorf("NCCLInitAll: %v", err)
	}
	if _, err := NCCLVersion(); !errors.Is(err, ErrNoNCCL) {
		t.Errorf("NCCLVersion: %v", err)
	}
	t.Logf("without NCCL: %v", err)
}
