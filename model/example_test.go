package model_test

import (
	"fmt"

	"github.com/commsim/commsim/model"
)

func ExampleBuiltin() {
	for _, name := range model.Builtins() {
		p, err := model.Builtin(name)
		if err != nil {
			fmt.Println(err)
			return
		}
		fwd, bwd := p.Compute()
		fmt.Printf("%s: %d layers, %d params, compute %.1f ms forward + %.1f ms backward\n",
			p.Name, len(p.Layers), p.TotalParams(), fwd*1e3, bwd*1e3)
	}
	// Output:
	// gpt2-small: 14 layers, 124439808 params, compute 10.3 ms forward + 20.5 ms backward
	// llama-7b: 34 layers, 6738415616 params, compute 136.8 ms forward + 273.6 ms backward
	// llama-70b: 82 layers, 68976648192 params, compute 1422.9 ms forward + 2845.9 ms backward
}

func ExampleParse() {
	p, err := model.Parse([]byte(`
name: two-blocks
tokens: 4096
peak_tflops: 989
mfu: 0.4
layers:
  - {name: embed, params: 131072000, dtype: bf16, forward: 0, backward: 0}
  - {name: block0, params: 202383360, dtype: bf16}
  - {name: block1, params: 202383360, dtype: bf16, forward: 4ms, backward: 8ms, sharded: true}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range p.Layers {
		fmt.Printf("%s %d %v %.3fms %.3fms %v\n", l.Name, l.Params, l.DType, l.Forward*1e3, l.Backward*1e3, l.Sharded)
	}
	_, err = model.Parse([]byte("name: m\nlayers: [{name: a, params: 1, dtype: f32}]"))
	fmt.Println(err)
	// Output:
	// embed 131072000 bf16 0.000ms 0.000ms false
	// block0 202383360 bf16 4.191ms 8.382ms false
	// block1 202383360 bf16 4.000ms 8.000ms true
	// model: yaml: line 2: layers[0] "a": no forward and backward times, and no top-level tokens, peak_tflops, mfu to derive them from params
}
