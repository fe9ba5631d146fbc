package sysmodel

import (
	"io"
	"slices"
	"strconv"
	"strings"
)

// Kieker's SystemModelRepository.saveSystemToHTMLFile, the file
// trace-analysis --print-System-Model writes (system-entities.html).
//
// Kieker keeps each kind of entity in a java.util.Hashtable keyed by id
// and lists its values(): a Hashtable walks its buckets from the last to
// the first, and ids 1…n always sit in buckets of their own (the table
// grows before its count reaches its capacity), so the entities come in
// descending id order. A component type's operations come in the order
// they were added.

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\"", "&quot;", "'", "&#x27;", "/", "&#x2F;")

// kiekerSig is Kieker's Signature.toString: modifiers, name, parameters
// separated by ',', and ":returnType" when there is one.
func kiekerSig(o *Operation) string {
	var b strings.Builder
	for _, m := range o.Sig.Modifiers {
		b.WriteString(m)
		b.WriteByte(' ')
	}
	b.WriteString(o.Sig.Name)
	b.WriteByte('(')
	b.WriteString(strings.Join(o.Sig.Params, ","))
	b.WriteByte(')')
	if o.Sig.ReturnType != "" {
		b.WriteByte(':')
		b.WriteString(o.Sig.ReturnType)
	}
	return b.String()
}

func anchor(kind string, id int, caption string) string {
	return `<a name="` + kind + "-" + strconv.Itoa(id) + `">` + caption + "</a>"
}

func ref(kind string, id int, caption string) string {
	return `<a href="#` + kind + "-" + strconv.Itoa(id) + `">` + caption + "</a>"
}

// descending returns s in descending id order.
func descending[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// WriteHTML writes the repository as Kieker's system-entities.html.
func (r *Repository) WriteHTML(w io.Writer) error {
	var b strings.Builder
	ln := func(s ...string) {
		for _, x := range s {
			b.WriteString(x)
		}
		b.WriteByte('\n')
	}
	space := func(n int) {
		ln("<pre>\n" + strings.Repeat(".\n", n) + "</pre>")
	}
	table := func(title string, cols ...string) {
		ln(`<table class="tab" border="1" style="width:100%">`)
		ln(`<tr><th class="tabTitle" colspan="`, strconv.Itoa(len(cols)), `">`, title, "</th></tr>")
		ln("<tr>")
		for _, c := range cols {
			ln(`<th class="colTitle space">`, c, "</th>")
		}
		ln("</tr>")
	}
	row := func(cells ...string) {
		ln(`<tr class="cell">`)
		for _, c := range cells {
			if c == "" {
				c = "&nbsp;"
			}
			ln(`<td class="space">`, c, "</td>")
		}
		ln("</tr>")
	}
	ln("<html><head><title>System Model Reconstructed by Kieker.TraceAnalysis</title>")
	ln("<style type=\"text/css\">\n" +
		".colTitle {font-size: 11px; background: linear-gradient(to bottom, #FDFDFD, #DDDDDD) transparent }\n" +
		".cell {font-family: monospace; font-size: 10px; font-family: inherited}\n" +
		".tabTitle {padding: 4px 4px; font-size: 12px; background: linear-gradient(to bottom, #FFFFFF, #CCEEFF) transparent; border: 1px solid #4DC4FF;" +
		"color: #333399}\n" +
		".tab {border-collapse: collapse;  border: 1px solid #9D9D9D; font-family: \"Segoe UI\", \"Verdana\", \"Arial\", sans-serif}\n" +
		".space{padding: 4px 10px;}\n" + "</style>")
	ln("</head><body>")
	space(10)
	ln(`<span style="display: inline-block">`)
	table("Component Types", "ID", "Package", "Name", "Operations")
	for _, t := range descending(r.Types) {
		var ops strings.Builder
		for _, o := range t.Operations {
			ops.WriteString("<li>" + ref("OPERATION", o.ID, htmlEscaper.Replace(kiekerSig(o))) + "</li>")
		}
		row(anchor("COMPONENT_TYPE", t.ID, strconv.Itoa(t.ID)), htmlEscaper.Replace(t.Package), htmlEscaper.Replace(t.Name), ops.String())
	}
	ln("</table>")
	ln("<br/>")
	table("Operations", "ID", "Component type", "Name", "Parameter types", "Return type")
	for _, o := range descending(r.Operations) {
		var params strings.Builder
		for _, p := range o.Sig.Params {
			params.WriteString("<li>" + htmlEscaper.Replace(p) + "</li>")
		}
		row(anchor("OPERATION", o.ID, strconv.Itoa(o.ID)), ref("COMPONENT_TYPE", o.Type.ID, htmlEscaper.Replace(o.Type.FullName())),
			htmlEscaper.Replace(o.Sig.Name), params.String(), htmlEscaper.Replace(o.Sig.ReturnType))
	}
	ln("</table>")
	ln("<br/>")
	table("Assembly Components", "ID", "Name", "Component type")
	for _, a := range descending(r.Assemblies) {
		row(anchor("ASSEMBLY_COMPONENT", a.ID, strconv.Itoa(a.ID)), a.Name(), ref("COMPONENT_TYPE", a.Type.ID, htmlEscaper.Replace(a.Type.FullName())))
	}
	ln("</table>")
	ln("<br/>")
	table("Execution Containers", "ID", "Name")
	for _, c := range descending(r.Containers) {
		row(anchor("EXECUTION_CONTAINER", c.ID, strconv.Itoa(c.ID)), htmlEscaper.Replace(c.Name))
	}
	ln("</table>")
	ln("<br/>")
	table("Deployment Components", "ID", "Assembly component", "Execution container")
	for _, a := range descending(r.Allocations) {
		// Kieker links the assembly component to an allocation anchor.
		row(anchor("ALLOCATION_COMPONENT", a.ID, strconv.Itoa(a.ID)), ref("ALLOCATION_COMPONENT", a.Assembly.ID, htmlEscaper.Replace(a.Assembly.String())),
			ref("EXECUTION_CONTAINER", a.Container.ID, htmlEscaper.Replace(a.Container.Name)))
	}
	ln("</table>")
	ln("</span>")
	space(50)
	ln("</body></html>")
	_, err := io.WriteString(w, b.String())
	return err
}

// RepositoryJSON is the system model in JSON: every entity with Kieker's
// id, in id order.
type RepositoryJSON struct {
	Containers []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	} `json:"executionContainers"`
	Types []struct {
		ID         int    `json:"id"`
		Package    string `json:"package"`
		Name       string `json:"name"`
		Operations []int  `json:"operations"`
	} `json:"componentTypes"`
	Operations []struct {
		ID         int      `json:"id"`
		Type       int      `json:"componentType"`
		Name       string   `json:"name"`
		Params     []string `json:"parameterTypes"`
		ReturnType string   `json:"returnType,omitempty"`
		Signature  string   `json:"signature"`
	} `json:"operations"`
	Assemblies []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
		Type int    `json:"componentType"`
	} `json:"assemblyComponents"`
	Allocations []struct {
		ID        int    `json:"id"`
		Name      string `json:"name"` // host::@N:package.Class
		Assembly  int    `json:"assemblyComponent"`
		Container int    `json:"executionContainer"`
	} `json:"allocationComponents"`
}

// JSON returns the repository in JSON form.
func (r *Repository) JSON() RepositoryJSON {
	var j RepositoryJSON
	for _, c := range r.Containers {
		j.Containers = append(j.Containers, struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		}{c.ID, c.Name})
	}
	for _, t := range r.Types {
		ops := make([]int, 0, len(t.Operations))
		for _, o := range t.Operations {
			ops = append(ops, o.ID)
		}
		j.Types = append(j.Types, struct {
			ID         int    `json:"id"`
			Package    string `json:"package"`
			Name       string `json:"name"`
			Operations []int  `json:"operations"`
		}{t.ID, t.Package, t.Name, ops})
	}
	for _, o := range r.Operations {
		j.Operations = append(j.Operations, struct {
			ID         int      `json:"id"`
			Type       int      `json:"componentType"`
			Name       string   `json:"name"`
			Params     []string `json:"parameterTypes"`
			ReturnType string   `json:"returnType,omitempty"`
			Signature  string   `json:"signature"`
		}{o.ID, o.Type.ID, o.Sig.Name, append([]string{}, o.Sig.Params...), o.Sig.ReturnType, kiekerSig(o)})
	}
	for _, a := range r.Assemblies {
		j.Assemblies = append(j.Assemblies, struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
			Type int    `json:"componentType"`
		}{a.ID, a.Name(), a.Type.ID})
	}
	for _, a := range r.Allocations {
		j.Allocations = append(j.Allocations, struct {
			ID        int    `json:"id"`
			Name      string `json:"name"`
			Assembly  int    `json:"assemblyComponent"`
			Container int    `json:"executionContainer"`
		}{a.ID, a.String(), a.Assembly.ID, a.Container.ID})
	}
	return j
}
