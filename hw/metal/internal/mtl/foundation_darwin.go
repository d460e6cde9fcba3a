//go:build darwin

package mtl

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// Selectors of NSObject, NSString, NSError and NSAutoreleasePool.
var (
	sel_alloc                = objc.RegisterName("alloc")
	sel_new                  = objc.RegisterName("new")
	sel_retain               = objc.RegisterName("retain")
	sel_release              = objc.RegisterName("release")
	sel_drain                = objc.RegisterName("drain")
	sel_respondsToSelector   = objc.RegisterName("respondsToSelector:")
	sel_initWithUTF8String   = objc.RegisterName("initWithUTF8String:")
	sel_UTF8String           = objc.RegisterName("UTF8String")
	sel_length               = objc.RegisterName("length")
	sel_localizedDescription = objc.RegisterName("localizedDescription")
	sel_code                 = objc.RegisterName("code")
)

// Foundation classes, set by Load.
var (
	class_NSString          objc.Class
	class_NSAutoreleasePool objc.Class
)

// boolOf reads an Objective-C BOOL result: only the low byte is defined.
func boolOf(id objc.ID) bool { return byte(id) != 0 }

// respondsTo reports whether obj implements sel.
//
// Reference: https://developer.apple.com/documentation/objectivec/1418956-nsobject/1418583-respondstoselector
func respondsTo(obj objc.ID, sel objc.SEL) bool {
	return obj != 0 && boolOf(obj.Send(sel_respondsToSelector, sel))
}

// NSString is an immutable Foundation string.
//
// Reference: https://developer.apple.com/documentation/foundation/nsstring
type NSString struct{ id objc.ID }

// NewNSString returns an owned NSString holding s (alloc + initWithUTF8String:);
// Release it.
func NewNSString(s string) NSString {
	// purego passes a Go string as a NUL-terminated copy kept alive for
	// the call, which is what initWithUTF8String: reads.
	return NSString{objc.ID(class_NSString).Send(sel_alloc).Send(sel_initWithUTF8String, s)}
}

// String copies the string into Go.
func (s NSString) String() string {
	if s.id == 0 {
		return ""
	}
	p := objc.Send[unsafe.Pointer](s.id, sel_UTF8String)
	if p == nil {
		return ""
	}
	return goString(p)
}

// Release releases an owned string.
func (s NSString) Release() { release(s.id) }

// goString copies a NUL-terminated C string.
func goString(p unsafe.Pointer) string {
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// NSError is Foundation's error object; it is seen only through Error.
//
// Reference: https://developer.apple.com/documentation/foundation/nserror
type NSError struct{ id objc.ID }

// Description is the error's localizedDescription.
func (e NSError) Description() string {
	if e.id == 0 {
		return "unknown error (no NSError)"
	}
	return NSString{e.id.Send(sel_localizedDescription)}.String()
}

// Code is the error's code.
func (e NSError) Code() int {
	if e.id == 0 {
		return 0
	}
	return int(e.id.Send(sel_code))
}

// Error is a failed Metal call: the selector (or function) and what the
// NSError said.
type Error struct {
	Call        string // e.g. "newLibraryWithSource:options:error:"
	Code        int    // the NSError's code, 0 if there was none
	Description string // the NSError's localizedDescription
}

func (e *Error) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("mtl: %s: %s (code %d)", e.Call, e.Description, e.Code)
	}
	return fmt.Sprintf("mtl: %s: %s", e.Call, e.Description)
}

// errorFrom turns an NSError out-parameter into an *Error naming call.
// It must run inside the autorelease pool that owns the NSError.
func errorFrom(call string, nsErr objc.ID) *Error {
	e := NSError{nsErr}
	return &Error{Call: call, Code: e.Code(), Description: e.Description()}
}

// AutoreleasePool collects the autoreleased objects of one batch of calls.
// A pool belongs to the OS thread that made it, so it is used only
// through WithPool.
//
// Reference: https://developer.apple.com/documentation/foundation/nsautoreleasepool
type AutoreleasePool struct{ id objc.ID }

// WithPool runs f inside a fresh autorelease pool on a locked OS thread
// and drains the pool afterwards. Every Metal call in hw/metal goes through
// it: Go may move a goroutine between threads, and a pool pushed on one
// thread must be popped on the same one.
func WithPool(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := AutoreleasePool{objc.ID(class_NSAutoreleasePool).Send(sel_new)}
	defer p.id.Send(sel_drain)
	f()
}

func retain(id objc.ID) objc.ID {
	if id != 0 {
		id.Send(sel_retain)
	}
	return id
}

func release(id objc.ID) {
	if id != 0 {
		id.Send(sel_release)
	}
}
