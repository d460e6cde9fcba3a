package topology

import (
	"errors"
	"testing"
)

func TestRouteAvoidingGoesAroundDownLinks(t *testing.T) {
	tp, err := Parse("ring:4")
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := tp.Route(0, 1)
	if len(direct.Edges) != 1 {
		t.Fatalf("ring:4 0->1 takes %d hops", len(direct.Edges))
	}
	down := direct.Edges[0] / 2
	p, err := tp.RouteAvoiding(0, 1, func(l int) bool { return l == down })
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Edges) != 3 || p.Latency != 3e-6 {
		t.Fatalf("detour = %v, want 3 hops of 1us", p)
	}
	for _, e := range p.Edges {
		if e/2 == down {
			t.Fatalf("detour %v uses the down link %d", p.Edges, down)
		}
	}
	// The cached route is untouched.
	if again, _ := tp.Route(0, 1); len(again.Edges) != 1 {
		t.Fatal("RouteAvoiding changed the cached route")
	}
	if _, err := tp.RouteAvoiding(0, 1, func(int) bool { return true }); !errors.Is(err, ErrRoute) {
		t.Fatalf("with every link down: %v, want ErrRoute", err)
	}
	// A leaf destination whose only link is down is unreachable.
	sw, _ := Parse("switch:3")
	leaf, _ := sw.Route(0, 1)
	if _, err := sw.RouteAvoiding(0, 1, func(l int) bool { return l == leaf.Edges[1]/2 }); !errors.Is(err, ErrRoute) {
		t.Fatalf("leaf cut off: %v, want ErrRoute", err)
	}
}
