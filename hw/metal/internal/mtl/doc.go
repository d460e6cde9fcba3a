// Package mtl is a thin binding of the part of Apple's Metal and Foundation
// APIs that hw/metal needs, through purego's objc runtime: no cgo.
//
// It follows the shape of ebitengine's internal/graphicsdriver/metal/mtl:
// one Go type per Objective-C class, wrapping an objc.ID, with methods
// named after the selectors; selectors are registered once, in package
// variables; an NSError out-parameter becomes a Go *Error that names the
// call and carries the error's localizedDescription. Classes (which exist
// only once Metal.framework is loaded) are looked up by Load.
//
// There is no ARC. Objects returned by alloc/new/copy selectors are owned
// and must be Released; autoreleased objects that are kept past the
// caller's autorelease pool are retained here (CommandQueue.CommandBuffer,
// CommandBuffer.ComputeCommandEncoder, CommandBuffer.BlitCommandEncoder)
// and must be Released too. Callers wrap each batch of calls in an
// AutoreleasePool on a goroutine locked to its OS thread (see WithPool).
//
// Every file but this one is darwin-only; elsewhere the package is empty.
// Nothing here has run on Apple hardware yet: it is compile-checked for
// darwin/arm64 only.
package mtl
