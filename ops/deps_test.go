package ops_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOpsImportsOnlyHW enforces the dependency rule: ops sees devices only
// through the hw seam, never sim or a real backend.
func TestOpsImportsOnlyHW(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/commsim/commsim/ops").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/commsim/commsim") &&
			pkg != "github.com/commsim/commsim/ops" && pkg != "github.com/commsim/commsim/hw" {
			t.Errorf("ops depends on %s; it may import hw only", pkg)
		}
	}
	// fmt brings os and time in indirectly; what matters is that ops itself
	// never reaches for the clock, files or the network.
	direct, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "github.com/commsim/commsim/ops").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(direct)) {
		if pkg == "time" || pkg == "os" || pkg == "net" || strings.HasPrefix(pkg, "math/rand") {
			t.Errorf("ops imports %s: plans and the executor must not depend on the clock, files, network or randomness", pkg)
		}
	}
}
