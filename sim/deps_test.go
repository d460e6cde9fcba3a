package sim_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSimImportsOnlyHWAndTopology enforces the dependency rule: the
// simulator knows devices and fabrics, never plans; the driver that runs
// plans on it (simexec) sits above both. internal/suggest and
// internal/yamlerr, the "did you mean" and the YAML line numbers of
// topology's errors, are leaves of string helpers.
func TestSimImportsOnlyHWAndTopology(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/commsim/commsim/sim").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/commsim/commsim/sim", "github.com/commsim/commsim/hw", "github.com/commsim/commsim/topology",
			"github.com/commsim/commsim/internal/suggest", "github.com/commsim/commsim/internal/yamlerr":
		default:
			if strings.HasPrefix(pkg, "github.com/commsim/commsim") {
				t.Errorf("sim depends on %s; it may import hw and topology only", pkg)
			}
		}
	}
}
