package topology

import (
	"strings"
	"testing"
)

// TestPresetForNamesTheBoardsPresetsBuild: CUDA's names of the SXM boards
// the presets build give their preset, one node's or the …xN form, with
// gpus= for hosts that run fewer ranks than their 8, and the spec builds
// as many GPUs as the hosts ran; every other board is refused with the
// reason.
func TestPresetForNamesTheBoardsPresetsBuild(t *testing.T) {
	for _, tc := range []struct {
		gpu            string
		hosts, perHost int
		spec, preset   string
	}{
		{"NVIDIA H100 80GB HBM3", 1, 8, "dgx-h100", "dgx-h100"},
		{"NVIDIA H100 80GB HBM3", 2, 8, "dgx-h100x2", "dgx-h100xN"},
		{"NVIDIA H100 80GB HBM3", 10, 2, "dgx-h100x10,gpus=2", "dgx-h100xN"},
		{"NVIDIA H100 80GB HBM3", 1, 4, "dgx-h100,gpus=4", "dgx-h100"},
		{"A100-SXM4-40GB", 1, 8, "dgx-a100", "dgx-a100"},
		{"NVIDIA A100-SXM4-80GB", 4, 8, "dgx-a100x4", "dgx-a100xN"},
		{"NVIDIA H200", 2, 8, "hgx-h200x2", "hgx-h200xN"},
		{"NVIDIA B200", 1, 8, "hgx-b200", "hgx-b200"},
		{"NVIDIA B200", 2, 8, "dgx-b200x2", "dgx-b200xN"},
		{"NVIDIA B300 SXM6 AC", 2, 8, "dgx-b300x2", "dgx-b300xN"},
	} {
		spec, p, err := PresetFor(tc.gpu, tc.hosts, tc.perHost)
		if err != nil || spec != tc.spec || p.Name != tc.preset {
			t.Errorf("%q on %d hosts of %d: %q (preset %q), %v; want %q (%q)", tc.gpu, tc.hosts, tc.perHost, spec, p.Name, err, tc.spec, tc.preset)
			continue
		}
		topo, err := Resolve(spec)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
		} else if got := topo.NumGPUs(); got != tc.hosts*tc.perHost {
			t.Errorf("%s: %d GPUs, want %d", spec, got, tc.hosts*tc.perHost)
		}
	}
	for _, tc := range []struct {
		gpu            string
		hosts, perHost int
		want           string
	}{
		{"NVIDIA H100 PCIe", 1, 8, "PCIe card"},
		{"NVIDIA A100 80GB PCIe", 1, 8, "PCIe card"},
		{"NVIDIA H100 NVL", 1, 8, "NVL card"},
		{"NVIDIA H200 NVL", 2, 4, "NVL card"},
		{"NVIDIA H800", 1, 8, "narrower"},
		{"NVIDIA A800-SXM4-80GB", 1, 8, "narrower"},
		{"NVIDIA H20", 1, 8, "no preset builds the H20"},
		{"NVIDIA GB200", 2, 4, "gb200-nvl72,gpus=N"},
		{"NVIDIA GB300", 2, 4, "gb300-nvl72,gpus=N"},
		{"NVIDIA GH200 480GB", 4, 1, "Grace Hopper"},
		{"NVIDIA L40S", 1, 8, "no preset has this GPU"},
		{"", 1, 8, "no name"},
		{"NVIDIA H100 80GB HBM3", 1, 16, "16 NVIDIA H100 80GB HBM3 GPUs on one host"},
		{"NVIDIA H100 80GB HBM3", 0, 8, "want one or more"},
	} {
		if spec, _, err := PresetFor(tc.gpu, tc.hosts, tc.perHost); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q on %d hosts of %d: %q, %v; want an error with %q", tc.gpu, tc.hosts, tc.perHost, spec, err, tc.want)
		}
	}
}
