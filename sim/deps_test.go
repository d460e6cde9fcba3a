package sim_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSimImportsOnlyHWAndTopology enforces the dependency rule: the
// simulator knows devices and fabrics, never plans; the driver that runs
// plans on it (simexec) sits above both.
func TestSimImportsOnlyHWAndTopology(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/commsim/commsim/sim").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/commsim/commsim/sim", "github.com/commsim/commsim/hw", "github.com/commsim/commsim/topology":
		default:
			if strings.HasPrefix(pkg, "github.com/commsim/commsim") {
				t.Errorf("sim depends on %s; it may import hw and topology only", pkg)
			}
		}
	}
}
