package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/commsim/commsim/topology"
)

func showJSON(t *testing.T, args ...string) topoSummary {
	t.Helper()
	status, out, errOut := commsim(append([]string{"topo", "show", "--format", "json"}, args...)...)
	if status != 0 {
		t.Fatalf("%q: status %d: %s", args, status, errOut)
	}
	var sum topoSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestTopoShowTellsGPUsApart: the GPUs' reduction bandwidth is shown, so
// dgx-h100 and hgx-h200 (the same links, other GPUs) no longer look alike.
func TestTopoShowTellsGPUsApart(t *testing.T) {
	var outs []string
	for _, spec := range []string{"dgx-h100", "hgx-h200"} {
		_, out, _ := commsim("topo", "show", spec)
		outs = append(outs, out)
	}
	if !strings.Contains(outs[0], "gpu reduction bandwidth: 8 at 1TB/s") || !strings.Contains(outs[1], "gpu reduction bandwidth: 8 at 1.43TB/s") {
		t.Errorf("reduction bandwidths:\n%s\n%s", outs[0], outs[1])
	}
	if sum := showJSON(t, "switch:4"); len(sum.GPUReduce) != 1 || !sum.GPUReduce[0].Unlimited || sum.GPUReduce[0].Count != 4 {
		t.Errorf("switch:4 reduces without limit: %+v", sum.GPUReduce)
	}
}

func TestTopoShowPrintsPresetSources(t *testing.T) {
	_, out, _ := commsim("topo", "show", "dgx-h100x2,rail=true")
	if !strings.Contains(out, "sources of preset dgx-h100xN's numbers:") || !strings.Contains(out, "nccl-tests#290") {
		t.Errorf("no sources:\n%s", out)
	}
	if sum := showJSON(t, "dgx-h100x2"); sum.Preset != "dgx-h100xN" || len(sum.Sources) < 5 {
		t.Errorf("JSON preset %q, %d sources", sum.Preset, len(sum.Sources))
	}
	if _, out, _ := commsim("topo", "show", "switch:8"); strings.Contains(out, "sources") {
		t.Errorf("switch:8 is no preset, yet:\n%s", out)
	}
}

// TestTopoShowNamesTheLinksFaultsTake: the names listed are the ones
// what-if's --fault accepts; long lists are cut unless --links.
func TestTopoShowNamesTheLinksFaultsTake(t *testing.T) {
	sum := showJSON(t, "ring:4")
	if strings.Join(sum.LinkNames, " ") != "gpu0-gpu1 gpu1-gpu2 gpu2-gpu3 gpu3-gpu0" || sum.LinkCount != 4 {
		t.Fatalf("ring:4 links %q (%d)", sum.LinkNames, sum.LinkCount)
	}
	for _, name := range sum.LinkNames {
		if status, _, errOut := commsim("what-if", "--topo", "ring:4", "-e", "1MiB", "--fault", "link "+name+" degrade 50% at 0"); status != 0 {
			t.Errorf("--fault on listed link %s: status %d: %s", name, status, errOut)
		}
	}
	if sum := showJSON(t, "dgx-h100x8"); len(sum.LinkNames) != maxListedLinks || sum.LinkCount != 192 {
		t.Errorf("dgx-h100x8 without --links: %d names of %d", len(sum.LinkNames), sum.LinkCount)
	}
	if sum := showJSON(t, "dgx-h100x8", "--links"); len(sum.LinkNames) != 192 {
		t.Errorf("dgx-h100x8 --links: %d names", len(sum.LinkNames))
	}
	if _, out, _ := commsim("topo", "show", "dgx-h100x8"); !strings.Contains(out, "(160 more: --links lists all 192)") {
		t.Errorf("the cut list does not say so:\n%s", out)
	}
}

// TestTopoShowJSONKeysAreSnakeCase walks every key of show's JSON.
func TestTopoShowJSONKeysAreSnakeCase(t *testing.T) {
	_, out, _ := commsim("topo", "show", "--format", "json", "dgx-h100x2")
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snake.MatchString(k) {
					t.Errorf("key %q at %s is not snake_case", k, path)
				}
				walk(x, path+"."+k)
			}
		case []any:
			for _, x := range v {
				walk(x, path+"[]")
			}
		}
	}
	walk(doc, "$")
}

// topo presets lists every preset by the name --topo takes, with its
// summary and sources, and each name (N filled in) builds a fabric.
func TestTopoPresetsListsWhatTopoTakes(t *testing.T) {
	status, table, errOut := commsim("topo", "presets")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	status, lines, errOut := commsim("topo", "presets", "--format", "json")
	if status != 0 {
		t.Fatalf("json: status %d: %s", status, errOut)
	}
	listed := jsonLines[presetLine](t, lines)
	if len(listed) != len(topology.Presets()) {
		t.Fatalf("%d presets listed, %d built in", len(listed), len(topology.Presets()))
	}
	for _, p := range listed {
		if !strings.Contains(table, p.Name) || !strings.Contains(table, p.Summary) || len(p.Sources) == 0 {
			t.Errorf("%s: missing from the table, or without sources: %+v", p.Name, p)
		}
		spec := strings.Replace(strings.Replace(p.Name, "xN", "x2", 1), ":N", ":2", 1)
		if _, err := topology.Resolve(spec); err != nil {
			t.Errorf("%s: the listed name does not build (%s): %v", p.Name, spec, err)
		}
	}
	for _, bad := range [][]string{{"topo", "presets", "--format", "csv"}, {"topo", "presets", "dgx-h100"}} {
		if status, _, errOut := commsim(bad...); status != 2 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: status %d, %q; want a one-line usage error", bad, status, errOut)
		}
	}
}
