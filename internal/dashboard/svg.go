package dashboard

import (
	"fmt"
	"html"
	"html/template"
	"strings"
)

// The charts are SVG drawn here, inline in the page: numbers and escaped
// labels only, colored by the stylesheet through class names (the CSP
// allows no style attribute).

// sparkline draws values as a small line, scaled to its largest value;
// label is its accessible name.
func sparkline(values []int64, label string) template.HTML {
	const w, h = 120.0, 24.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, w, h, w, h, html.EscapeString(label))
	if len(values) > 0 {
		top := maxOf(values)
		b.WriteString(`<polyline class="s0" points="`)
		writePoints(&b, values, top, 1, 1, w-2, h-2)
		b.WriteString(`"/>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // only numbers and an escaped label
}

// series is one line of a chart.
type series struct {
	Name   string
	Values []int64
}

// chart draws several series over the same x axis (one point per
// period), scaled to the largest value of all, with the first and last
// period's labels under the axis and the top value beside it; the
// legend is the page's (class s0, s1, … match the series' order).
func chart(ss []series, first, last, label string) template.HTML {
	const w, h, left, bottom = 800.0, 200.0, 40.0, 18.0
	var top int64
	n := 0
	for _, s := range ss {
		top = max(top, maxOf(s.Values))
		n = max(n, len(s.Values))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s">`, w, h, html.EscapeString(label))
	fmt.Fprintf(&b, `<line class="axis" x1="%g" y1="%g" x2="%g" y2="%g"/>`, left, h-bottom, w, h-bottom)
	fmt.Fprintf(&b, `<line class="axis" x1="%g" y1="4" x2="%g" y2="%g"/>`, left, left, h-bottom)
	fmt.Fprintf(&b, `<text class="lbl" x="%g" y="12" text-anchor="end">%d</text>`, left-4, top)
	fmt.Fprintf(&b, `<text class="lbl" x="%g" y="%g" text-anchor="end">0</text>`, left-4, h-bottom)
	fmt.Fprintf(&b, `<text class="lbl" x="%g" y="%g">%s</text>`, left, h-3, html.EscapeString(first))
	fmt.Fprintf(&b, `<text class="lbl" x="%g" y="%g" text-anchor="end">%s</text>`, w, h-3, html.EscapeString(last))
	for i, s := range ss {
		if len(s.Values) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<polyline class="s%d" points="`, i)
		writePoints(&b, s.Values, top, left+2, 4, w-left-4, h-bottom-6)
		b.WriteString(`"><title>`)
		b.WriteString(html.EscapeString(s.Name))
		b.WriteString(`</title></polyline>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // only numbers and escaped labels
}

// writePoints writes the polyline points of values in the box (x, y, w,
// h), top being the value drawn at the box's top; a single value is a
// flat line.
func writePoints(b *strings.Builder, values []int64, top int64, x, y, w, h float64) {
	if top <= 0 {
		top = 1
	}
	if len(values) == 1 {
		values = []int64{values[0], values[0]}
	}
	step := w / float64(len(values)-1)
	for i, v := range values {
		if i > 0 {
			b.WriteByte(' ')
		}
		py := y + h - h*float64(max(v, 0))/float64(top)
		fmt.Fprintf(b, "%.1f,%.1f", x+step*float64(i), py)
	}
}

func maxOf(vs []int64) int64 {
	var m int64
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}
