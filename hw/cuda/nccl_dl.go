//go:build (linux || darwin) && (amd64 || arm64)

package cuda

import (
	"fmt"
	"runtime"

	"github.com/ebitengine/purego"

	"github.com/commsim/commsim/internal/dlfcn"
)

// The build line names the architectures as well as the systems because
// ncclCommInitRank takes a struct by value, which purego supports on amd64
// and arm64 only; elsewhere its RegisterFunc would panic, so those builds
// get nccl_other.go instead.

// openNCCL opens the library at path and binds every symbol the package
// uses, looking each up with Dlsym first so that a missing one is an error
// naming it rather than a panic in RegisterFunc.
func openNCCL(path string) (*ncclLib, error) {
	h, err := dlfcn.Open(path)
	if err != nil {
		return nil, err
	}
	l := &ncclLib{path: path}
	for _, sym := range []struct {
		name     string
		fn       any
		optional bool
	}{
		{"ncclGetVersion", &l.getVersion, false},
		{"ncclGetUniqueId", &l.getUniqueID, false},
		{"ncclCommInitRank", &l.commInitRank, false},
		{"ncclCommInitRankConfig", &l.commInitRankConfig, true},
		{"ncclCommInitAll", &l.commInitAll, false},
		{"ncclAllReduce", &l.allReduce, false},
		{"ncclAllGather", &l.allGather, false},
		{"ncclReduceScatter", &l.reduceScatter, false},
		{"ncclBroadcast", &l.broadcast, false},
		{"ncclSend", &l.send, false},
		{"ncclRecv", &l.recv, false},
		{"ncclGroupStart", &l.groupStart, false},
		{"ncclGroupEnd", &l.groupEnd, false},
		{"ncclCommGetAsyncError", &l.commGetAsyncError, false},
		{"ncclCommAbort", &l.commAbort, false},
		{"ncclCommDestroy", &l.commDestroy, false},
		{"ncclGetErrorString", &l.getErrorString, false},
		{"ncclGetLastError", &l.getLastError, true},
	} {
		addr, err := dlfcn.Sym(h, sym.name)
		if err != nil {
			if sym.optional {
				continue
			}
			purego.Dlclose(h)
			return nil, fmt.Errorf("no symbol %s (NCCL 2.7 or later is needed): %v", sym.name, err)
		}
		purego.RegisterFunc(sym.fn, addr)
	}
	v := new(int32)
	var pin runtime.Pinner
	pin.Pin(v)
	defer pin.Unpin()
	if r := l.getVersion(v); r != ncclSuccess {
		purego.Dlclose(h)
		return nil, fmt.Errorf("ncclGetVersion: ncclResult %d: %s", r, l.getErrorString(r))
	}
	l.version = int(*v)
	return l, nil
}
