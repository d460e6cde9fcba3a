package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestKit keeps the CLI thin: --check judges runs with
// package verify, and nothing the binary links may pull in the testing
// package or gopter (proptest's business).
func TestBinaryLinksNoTestKit(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/commsim/commsim/cmd/commsim").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.Contains(pkg, "gopter") || pkg == "github.com/commsim/commsim/proptest" {
			t.Errorf("the commsim binary depends on %s", pkg)
		}
	}
}
