package metal

import "errors"

// ErrUnavailable is returned while there is no Metal backend.
var ErrUnavailable = errors.New("metal backend: needs macOS with a Metal GPU, and is not implemented in this version of commsim")

// Available reports why Metal devices cannot be used.
func Available() error { return ErrUnavailable }
