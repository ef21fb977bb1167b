package eval

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Series is one named line or bar group of a plot.
type Series struct {
	Name string
	X    []float64 // line plots only
	Y    []float64
	// Labels optionally name the x ticks (line plots; the ticks are those
	// of the series with the most points).
	Labels []string
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8"}

const (
	plotW, plotH                       = 860, 420
	marginL, marginR, marginT, marginB = 70, 290, 40, 80
)

func svgHeader(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))
}

// axes draws the frame, y ticks from ymin to ymax and the axis labels.
func axes(b *strings.Builder, xlabel, ylabel string, ymin, ymax float64, yfmt string) {
	iw, ih := plotW-marginL-marginR, plotH-marginT-marginB
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", marginL, marginT, iw, ih)
	for i := 0; i <= 5; i++ {
		v := ymin + (ymax-ymin)*float64(i)/5
		y := float64(marginT+ih) - float64(ih)*float64(i)/5
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, marginL+iw, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, y+4, fmt.Sprintf(yfmt, v))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", marginL+iw/2, plotH-10, html.EscapeString(xlabel))
	fmt.Fprintf(b, `<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginT+ih/2, html.EscapeString(ylabel))
}

func legend(b *strings.Builder, names []string) {
	for i, n := range names {
		y := marginT + 10 + 20*i
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", plotW-marginR+15, y, palette[i%len(palette)])
		if r := []rune(n); len(r) > 40 {
			n = string(r[:39]) + "…"
		}
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", plotW-marginR+32, y+10, html.EscapeString(n))
	}
}

// LinePlot renders series as lines with markers; x ticks at the points of
// the first series.
func LinePlot(title, xlabel, ylabel string, ymin, ymax float64, series []Series) string {
	var b strings.Builder
	svgHeader(&b, title)
	axes(&b, xlabel, ylabel, ymin, ymax, "%.2f")
	iw, ih := float64(plotW-marginL-marginR), float64(plotH-marginT-marginB)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, x := range s.X {
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
		}
	}
	if !(xmax > xmin) {
		xmin, xmax = xmin-1, xmin+1
	}
	px := func(x float64) float64 { return float64(marginL) + 20 + (iw-40)*(x-xmin)/(xmax-xmin) }
	py := func(y float64) float64 {
		y = math.Max(ymin, math.Min(ymax, y))
		return float64(marginT) + ih - ih*(y-ymin)/(ymax-ymin)
	}
	if len(series) > 0 {
		ticks := series[0]
		for _, s := range series {
			if len(s.X) > len(ticks.X) {
				ticks = s
			}
		}
		for i, x := range ticks.X {
			label := fmt.Sprintf("%g", x)
			if i < len(ticks.Labels) {
				label = ticks.Labels[i]
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), plotH-marginB+16, html.EscapeString(label))
		}
	}
	var names []string
	for i, s := range series {
		names = append(names, s.Name)
		col := palette[i%len(palette)]
		var pts []string
		for j := range s.X {
			if j < len(s.Y) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[j]), py(s.Y[j])))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		for j := range s.X {
			if j < len(s.Y) {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s: %g → %.3f</title></circle>`+"\n", px(s.X[j]), py(s.Y[j]), col, html.EscapeString(s.Name), s.X[j], s.Y[j])
			}
		}
	}
	legend(&b, names)
	b.WriteString("</svg>\n")
	return b.String()
}

// BarPlot renders grouped bars: one group per category, one bar per series.
func BarPlot(title, xlabel, ylabel string, ymin, ymax float64, categories []string, series []Series) string {
	var b strings.Builder
	svgHeader(&b, title)
	axes(&b, xlabel, ylabel, ymin, ymax, "%.2f")
	iw, ih := float64(plotW-marginL-marginR), float64(plotH-marginT-marginB)
	gw := iw / float64(max(1, len(categories)))
	bw := gw * 0.8 / float64(max(1, len(series)))
	var names []string
	for i, s := range series {
		names = append(names, s.Name)
		for j, y := range s.Y {
			if j >= len(categories) {
				break
			}
			y = math.Max(ymin, math.Min(ymax, y))
			h := ih * (y - ymin) / (ymax - ymin)
			x := float64(marginL) + gw*float64(j) + gw*0.1 + bw*float64(i)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %.3f</title></rect>`+"\n",
				x, float64(marginT)+ih-h, bw, h, palette[i%len(palette)], html.EscapeString(categories[j]), html.EscapeString(s.Name), s.Y[j])
		}
	}
	for j, c := range categories {
		x := float64(marginL) + gw*float64(j) + gw/2
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-30 %.1f %d)">%s</text>`+"\n", x, plotH-marginB+14, x, plotH-marginB+14, html.EscapeString(c))
	}
	legend(&b, names)
	b.WriteString("</svg>\n")
	return b.String()
}

// LogLinePlot is LinePlot with a logarithmic y axis (values must be > 0),
// for latency distributions spanning orders of magnitude.
func LogLinePlot(title, xlabel, ylabel string, series []Series) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	logged := make([]Series, len(series))
	for i, s := range series {
		logged[i] = Series{Name: s.Name, X: s.X, Labels: s.Labels}
		for _, y := range s.Y {
			y = math.Max(y, 1e-6)
			lo, hi = math.Min(lo, y), math.Max(hi, y)
			logged[i].Y = append(logged[i].Y, math.Log10(y))
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	ymin, ymax := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if ymax <= ymin {
		ymax = ymin + 1
	}
	out := LinePlot(title, xlabel, ylabel+" (log scale)", ymin, ymax, logged)
	// relabel the y ticks: the plot was drawn in log10 units
	for i := 0; i <= 5; i++ {
		v := ymin + (ymax-ymin)*float64(i)/5
		out = strings.Replace(out, fmt.Sprintf(`text-anchor="end">%.2f</text>`, v), fmt.Sprintf(`text-anchor="end">%.3g</text>`, math.Pow(10, v)), 1)
	}
	return out
}
