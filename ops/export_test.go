package ops

// StreamEverything makes Compile stream every plan it can until the
// returned function is called.
func StreamEverything() (restore func()) {
	streamAbove = -1
	return func() { streamAbove = StreamAbove }
}

// SymmetryOf names the group under which plan is rank-symmetric for
// mirroring: "rotation", "xor" or "none".
func SymmetryOf(plan *Plan) string {
	return [...]string{notSymmetric: "none", rotation: "rotation", xor: "xor"}[plan.symmetry()]
}
