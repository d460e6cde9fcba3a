package ops

// StreamEverything makes Compile stream every plan it can until the
// returned function is called.
func StreamEverything() (restore func()) {
	streamAbove = -1
	return func() { streamAbove = StreamAbove }
}
