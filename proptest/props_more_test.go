package proptest

import "testing"

// The simulator's properties, under go test. The default test counts keep
// the four to about 20 s on two cores; COMMSIM_PROPTEST_N replaces them and
// COMMSIM_PROPTEST_SEED replays a run.

func TestDeterministicProperty(t *testing.T) {
	eqCheck(t, "sim is deterministic", DeterministicProperty(GenCase(GenOptions{})), 600)
}

func TestFormulaTimeProperty(t *testing.T) {
	eqCheck(t, "sim times equal the α-β-γ formulas", FormulaTimeProperty(), 10000)
}

func TestLowerBoundProperty(t *testing.T) {
	eqCheck(t, "sim never beats the lower bounds", LowerBoundProperty(), 10000)
}

func TestMaxMinFairProperty(t *testing.T) {
	eqCheck(t, "MaxMinFair is max-min fair", MaxMinFairProperty(), 100000)
}

func TestMirrorProperty(t *testing.T) {
	eqCheck(t, "mirrored runs take the full simulation's time", MirrorProperty(), 600)
}

func TestFoldProperty(t *testing.T) {
	folded := 0
	eqCheck(t, "folded NCCL runs take the full simulation's time", FoldProperty(&folded), 100)
	if folded == 0 {
		t.Error("no run was folded")
	}
	t.Logf("%d runs folded", folded)
}
