//go:build !((linux || darwin) && (amd64 || arm64))

package cuda

import (
	"fmt"
	"runtime"
)

// openNCCL explains that NCCL cannot be loaded here: NCCL ships for Linux,
// and purego passes ncclCommInitRank's by-value id on amd64 and arm64 only.
func openNCCL(path string) (*ncclLib, error) {
	return nil, fmt.Errorf("%w: %s cannot be loaded on %s/%s (native collectives need NCCL on linux/amd64 or linux/arm64)",
		ErrNoNCCL, path, runtime.GOOS, runtime.GOARCH)
}
