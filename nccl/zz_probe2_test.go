package nccl

import (
	"fmt"
	"testing"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

func TestZZProbe2(t *testing.T) {
	for _, c := range []struct {
		spec string
		nics int
		v    Version
	}{{"dgx-h100x2,sharp=inf", 0, 230}, {"dgx-a100x2,sharp=inf", 0, 230}, {"dgx-h100x2,sharp=inf", 4, 230}, {"dgx-a100x2,sharp=inf", 4, 230}, {"dgx-a100x2,sharp=inf", 4, 221}, {"dgx-h100x2,sharp=inf", 0, 221}, {"dgx-b200x2,sharp=inf", 0, 221}, {"dgx-b200x2,sharp=inf", 0, 230}, {"cluster:2x4,arch=hopper,sharp=inf", 0, 221}} {
		tp, _ := topology.Parse(c.spec)
		s, _ := Describe(tp)
		if c.nics > 0 {
			s.NICs = c.nics
		}
		d := estimate(s, ops.AllReduce, 1<<30, CollNetDirect, simple, Options{Version: c.v}, elements{})
		ch := estimate(s, ops.AllReduce, 1<<30, CollNetChain, simple, Options{Version: c.v}, elements{})
		g := graphOf(s, CollNetDirect, c.v)
		fmt.Printf("%s nics=%d v=%v direct graph %+v bus=%.1f chain bus=%.1f ring ch=%d %s %s\n", c.spec, c.nics, c.v, g, d.BusBW, ch.BusBW, bandwidths(s, Ring).channels, d.Off, ch.Off)
	}
}
