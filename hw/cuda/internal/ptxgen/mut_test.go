package ptxgen

import (
	"strings"
	"testing"
)

// TestInterpreterCatchesMutants checks the checker: small wrong edits of
// the generated PTX (a NaN constant, min for max, a mask, the rounding
// conversion, the u8 carry mask, the scalar index, signed division, a byte
// position, the order of packed halves) must each make some kernel differ
// from the contract under the interpreter.
func TestInterpreterCatchesMutants(t *testing.T) {
	src := Generate()
	for _, m := range [][2]string{
		{"selp.b32 %r10, 0x7FC00000", "selp.b32 %r10, 0x7FC00001"},
		{"min.s32 %r20, %r20, %r21;", "max.s32 %r20, %r20, %r21;"},
		{"and.b32 %r20, %r20, 0x7FFF;", "and.b32 %r20, %r20, 0x7FFE;"},
		{"cvt.rn.bf16.f32", "cvt.rn.f16.f32"},
		{"0x80808080", "0x80808000"},
		{"selp.b64 %rd17, %rd11, %rd17, %p2;", "selp.b64 %rd17, %rd17, %rd11, %p2;"},
		{"div.s64 %rd24, %rd24, %rd3;", "div.u64 %rd24, %rd24, %rd3;"},
		{"bfi.b32 %r10, %r22, %r10, 8, 8;", "bfi.b32 %r10, %r22, %r10, 16, 8;"},
		{"mov.b32 %r11, {%h1, %h2};", "mov.b32 %r11, {%h2, %h1};"},
	} {
		if !strings.Contains(src, m[0]) {
			t.Errorf("mutant %q not found", m[0])
			continue
		}
		mod := parseModule(t, strings.Replace(src, m[0], m[1], -1))
		caught := false
		for _, k := range Kernels() {
			if runOne(t, mod[k.Name], k) {
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("mutant %q -> %q survived", m[0], m[1])
		}
	}
}
