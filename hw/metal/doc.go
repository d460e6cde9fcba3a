// Package metal will implement hw on Apple GPUs through Metal.framework with
// purego's objc runtime (no cgo). Nothing is implemented here yet: there is
// no Metal backend in this version of commsim.
package metal
