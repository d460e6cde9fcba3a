package cuda

import (
	"fmt"
	"strings"

	"github.com/commsim/commsim/hw"
)

// Placement says how NewWorld puts ranks on GPUs.
type Placement uint8

const (
	// OnePerGPU gives rank r GPU r to itself. NewWorld fails if there are
	// fewer GPUs than ranks. This is the placement NCCL accepts.
	OnePerGPU Placement = iota + 1
	// Virtual puts every rank on GPU 0 as a virtual rank: its own
	// allocations and streams, messages as device-to-device copies. One
	// GPU then runs a plan of any number of ranks.
	Virtual
	// VirtualSpread puts rank r on GPU r mod the number of GPUs, so ranks
	// share GPUs round robin and messages between GPUs are peer copies.
	VirtualSpread
)

var placementNames = [...]string{OnePerGPU: "gpu", Virtual: "virtual", VirtualSpread: "spread"}

// String returns "gpu", "virtual" or "spread".
func (p Placement) String() string {
	if p < OnePerGPU || p > VirtualSpread {
		return fmt.Sprintf("placement(%d)", uint8(p))
	}
	return placementNames[p]
}

// ParsePlacement returns the placement String names (case ignored).
func ParsePlacement(s string) (Placement, error) {
	for p := OnePerGPU; p <= VirtualSpread; p++ {
		if strings.EqualFold(strings.TrimSpace(s), placementNames[p]) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("cuda: %w: unknown placement %q (valid: gpu, virtual, spread)", hw.ErrBadArgument, s)
}

// Layout returns the GPU ordinal of each of p ranks under placement on a
// machine with gpus GPUs: the argument NewWorldOn takes.
func Layout(p int, placement Placement, gpus int) ([]int, error) {
	if err := checkLayout(p, placement); err != nil {
		return nil, err
	}
	if gpus < 1 {
		return nil, fmt.Errorf("cuda: no GPU to place %d ranks on", p)
	}
	out := make([]int, p)
	switch placement {
	case OnePerGPU:
		if p > gpus {
			return nil, fmt.Errorf("cuda: %w: %d ranks one per GPU need %d GPUs, the driver sees %d (use virtual ranks to share GPUs)",
				hw.ErrBadArgument, p, p, gpus)
		}
		for r := range out {
			out[r] = r
		}
	case Virtual:
		// every rank on GPU 0
	case VirtualSpread:
		for r := range out {
			out[r] = r % gpus
		}
	}
	return out, nil
}

// checkLayout refuses what no machine could lay out: fewer than one rank,
// or a placement that is none of the three.
func checkLayout(p int, placement Placement) error {
	if p < 1 {
		return fmt.Errorf("cuda: %w: %d ranks (want at least 1)", hw.ErrBadArgument, p)
	}
	if placement < OnePerGPU || placement > VirtualSpread {
		return fmt.Errorf("cuda: %w: invalid placement %v", hw.ErrBadArgument, placement)
	}
	return nil
}

// NewWorld opens a world of p ranks placed on this machine's GPUs. close
// waits for the world's workers to stop, then frees every buffer, stream
// and staging block of the world; the GPUs' primary contexts and the
// loaded kernels stay for the next world. Without a usable driver the
// error wraps ErrNoDriver.
func NewWorld(p int, placement Placement) (w *hw.World, close func() error, err error) {
	if err := checkLayout(p, placement); err != nil {
		return nil, nil, err // bad whatever the machine: before looking for a driver
	}
	devs, err := Devices()
	if err != nil {
		return nil, nil, err
	}
	gpus, err := Layout(p, placement, len(devs))
	if err != nil {
		return nil, nil, err
	}
	return NewWorldOn(gpus)
}

// deviceName is a rank's device name: "cuda:gpuG" when the rank has GPU G
// to itself, "cuda:gpuG/rR" when GPU G holds several ranks.
func deviceName(gpus []int, rank int) string {
	n := 0
	for _, g := range gpus {
		if g == gpus[rank] {
			n++
		}
	}
	if n == 1 {
		return fmt.Sprintf("cuda:gpu%d", gpus[rank])
	}
	return fmt.Sprintf("cuda:gpu%d/r%d", gpus[rank], rank)
}
