package ops

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// fedStep is a step as the executor feeds it to a single-lane stream: the
// lane and the After list, which one lane does not need, are left out and
// offsets are 32-bit (Validate keeps every buffer under 2^31 elements).
// It takes 28 bytes where a Step takes 104, so the steps of a thousand
// ranks waiting to be fed stay in cache: reading them was a fifth of a
// 1024-rank ring all-reduce.
type fedStep struct {
	kind           StepKind
	srcBuf, dstBuf Buf
	tag            uint32
	peer           int32
	srcOff, srcLen int32
	dstOff, dstLen int32
}

// feedable converts s. Only a plan made by hand can hold a value that does
// not fit; it is refused rather than truncated into another, valid step.
func feedable(s Step) (fedStep, error) {
	for _, v := range [...]int{s.Peer, s.Src.Off, s.Src.Len, s.Dst.Off, s.Dst.Len} {
		if int(int32(v)) != v {
			return fedStep{}, fmt.Errorf("%w: step %v: %d does not fit in 32 bits", hw.ErrBadArgument, s, v)
		}
	}
	return fedStep{kind: s.Kind, srcBuf: s.Src.Buf, dstBuf: s.Dst.Buf, tag: s.Tag, peer: int32(s.Peer),
		srcOff: int32(s.Src.Off), srcLen: int32(s.Src.Len), dstOff: int32(s.Dst.Off), dstLen: int32(s.Dst.Len)}, nil
}

func (f fedStep) src() Ref { return Ref{Buf: f.srcBuf, Off: int(f.srcOff), Len: int(f.srcLen)} }
func (f fedStep) dst() Ref { return Ref{Buf: f.dstBuf, Off: int(f.dstOff), Len: int(f.dstLen)} }

// step is f as a Step, for error messages.
func (f fedStep) step() Step {
	return Step{Kind: f.kind, Peer: int(f.peer), Tag: f.tag, Src: f.src(), Dst: f.dst()}
}
