package model

import (
	"fmt"
	"io"
	"strconv"

	"github.com/commsim/commsim/topology"
	"go.yaml.in/yaml/v3"
)

// WriteYAML writes the profile in the format Parse reads, one layer per
// line with explicit times (topology.FormatLatency, which parses back bit
// for bit), so that Parse gives back a profile reflect.DeepEqual to p. It
// refuses a profile that Validate refuses.
func (p *Profile) WriteYAML(w io.Writer) error {
	if err := p.Validate(); err != nil {
		return err
	}
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	num := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s} }
	time := func(t float64) *yaml.Node {
		if t == 0 {
			return num("0")
		}
		return str(topology.FormatLatency(t))
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	root.Content = append(root.Content, str("name"), str(p.Name))
	if len(p.Sources) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, s := range p.Sources {
			seq.Content = append(seq.Content, str(s))
		}
		root.Content = append(root.Content, str("sources"), seq)
	}
	layers := &yaml.Node{Kind: yaml.SequenceNode}
	for _, l := range p.Layers {
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		m.Content = append(m.Content,
			str("name"), str(l.Name),
			str("params"), num(strconv.FormatInt(l.Params, 10)),
			str("dtype"), str(l.DType.String()),
			str("forward"), time(l.Forward),
			str("backward"), time(l.Backward))
		if l.Sharded {
			m.Content = append(m.Content, str("sharded"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
		}
		layers.Content = append(layers.Content, m)
	}
	root.Content = append(root.Content, str("layers"), layers)

	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return fmt.Errorf("model: write %q: %w", p.Name, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("model: write %q: %w", p.Name, err)
	}
	return nil
}
