package topology

import (
	"fmt"
	"strings"
)

// PresetFor names the preset for a job on hosts machines, perHost GPUs on
// each, that CUDA calls gpu ("NVIDIA H100 80GB HBM3", as nccl-tests' device lines
// print it): the one-node preset, or its …xN form for several hosts, with
// gpus= where a host runs fewer ranks than its 8 GPUs. It returns the
// spec and the preset, whose Summary says what the spec assumes that a
// device name cannot tell (the NICs, the network, the hosts' CPUs).
//
// It knows the boards the presets are: A100 SXM4, H100 and H200 SXM, B200
// and B300. A GPU on PCIe (PCIe cards, the NVL cards' bridges), one whose
// NVLink differs from the preset's (H800, A800), one the presets do not
// build (H20), or a Grace superchip, whose hosts may or may not share one
// NVLink domain, is an error that says so.
func PresetFor(gpu string, hosts, perHost int) (string, Preset, error) {
	if hosts < 1 || perHost < 1 {
		return "", Preset{}, fmt.Errorf("topology: %d hosts of %d GPUs: want one or more of one or more", hosts, perHost)
	}
	name := strings.TrimSpace(gpu)
	model := strings.ToUpper(strings.TrimPrefix(name, "NVIDIA "))
	family, err := boardOf(model)
	if err != nil {
		return "", Preset{}, fmt.Errorf("topology: no preset for %q: %v", name, err)
	}
	const perNode = 8 // every board's node the presets build
	if perHost > perNode {
		return "", Preset{}, fmt.Errorf("topology: %d %s GPUs on one host: the presets' %s nodes have %d (hosts that print one name for several machines?)", perHost, name, family.single, perNode)
	}
	spec, preset := family.single, family.single
	if hosts > 1 {
		spec, preset = fmt.Sprintf("%sx%d", family.multi, hosts), family.multi+"xN"
	}
	if perHost < perNode {
		spec += fmt.Sprintf(",gpus=%d", perHost)
	}
	for _, p := range Presets() {
		if p.Name == preset {
			return spec, p, nil
		}
	}
	return "", Preset{}, fmt.Errorf("topology: preset %s is missing", preset) // presetTable and boards disagree
}

// board is a GPU's presets: one node's, and the name its …xN form
// starts with.
type board struct{ single, multi string }

// boardOf reads CUDA's name of a GPU, upper case without "NVIDIA ".
func boardOf(model string) (board, error) {
	fields := strings.Fields(strings.ReplaceAll(model, "-", " "))
	if len(fields) == 0 {
		return board{}, fmt.Errorf("no name")
	}
	for _, f := range fields[1:] {
		switch f {
		case "PCIE":
			return board{}, fmt.Errorf("a PCIe card: every preset's GPUs are SXM boards on NVSwitch")
		case "NVL":
			return board{}, fmt.Errorf("an NVL card: PCIe, with NVLink bridges between pairs or fours, where every preset's GPUs are SXM boards on NVSwitch")
		}
	}
	switch fields[0] {
	case "A100":
		return board{"dgx-a100", "dgx-a100"}, nil
	case "H100":
		return board{"dgx-h100", "dgx-h100"}, nil
	case "H200":
		return board{"hgx-h200", "hgx-h200"}, nil
	case "B200":
		return board{"hgx-b200", "dgx-b200"}, nil
	case "B300":
		return board{"hgx-b300", "dgx-b300"}, nil
	case "A800", "H800":
		return board{}, fmt.Errorf("its NVLink (8 links) is narrower than the %s's, which the presets of its generation build", map[string]string{"A800": "A100", "H800": "H100"}[fields[0]])
	case "H20":
		return board{}, fmt.Errorf("no preset builds the H20; its NVLink and NVSwitch are the H100's, so dgx-h100 (with gpus=) is what NCCL sees, but not its compute")
	case "GB200", "GB300":
		return board{}, fmt.Errorf("a Grace Blackwell superchip: its hosts may share one NVLink domain (%s-nvl72,gpus=N) or meet over the network only (cluster:HOSTSxGPUS with its figures)", strings.ToLower(fields[0]))
	case "GH200":
		return board{}, fmt.Errorf("a Grace Hopper superchip: no preset builds one")
	}
	return board{}, fmt.Errorf("no preset has this GPU (presets: A100, H100, H200, B200, B300 SXM boards)")
}
