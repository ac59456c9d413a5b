// ssa-oracle answers, for generated cases, what Kubernetes' own server-side apply field manager
// (k8s.io/apimachinery/pkg/util/managedfields, the code the API server runs, with the built-in
// types' schema client-go embeds) does: a history of applies and updates by several managers makes
// the live object, then one apply by our manager is judged -- refused with its conflicts, or
// accepted, and whether it changed the object. InferCrane's read-only plan
// (infercrane/core/plan/fields.py) re-implements that judgement; tests/unit/core/plan/test_fields_oracle.py
// compares the two over generated cases.
//
// Input (stdin), one JSON case per line:
//
//	{"kind": "Deployment", "history": [{"op": "apply"|"update", "manager": "m", "object": {...}, "force": false}],
//	 "final": {"op": "apply", "manager": "m", "object": {...}}}
//
// `ssa-oracle quantity` prints each quantity of stdin (one per line) as the API server stores it.
// `ssa-oracle schema KIND...` prints instead, per kind, how server-side apply treats each list and
// each atomic map of its schema (dotted paths, `[]` for an element): {"list": "atomic"|"set"|"map",
// "keys": [...]} or {"map": "atomic"} -- the table fields.py compares by (infercrane/core/plan/ssa_schema.json).
//
// Output (stdout), one JSON answer per line, in order:
//
//	{"live": {... with metadata.managedFields}, "conflicts": [{"manager": "m", "operation": "Update", "field": ".spec.x"}],
//	 "changed": true, "error": ""}
//
// As the API server does, every object is decoded into its Go type before it is stored: quantities
// come back canonical ("16384Mi" as "16Gi"), and what the type does not know is dropped. No
// defaulting (client-go's scheme has no defaulters): the generated objects carry what they need.
//
// `--crd FILE` (before the mode, repeatable) adds a custom resource's kinds from its CRD, judged as
// the API server judges a custom resource: its schema built by apiextensions-apiserver's own
// OpenAPI builder (the CRD's storage version), its field manager NewDefaultCRDFieldManager, and
// its objects stored as sent (no Go type: a quantity keeps its text).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	goruntime "runtime"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/yaml"
)

// custom is a custom resource's kind, from its CRD (--crd).
type custom struct {
	gvk schema.GroupVersionKind
	tc  typeConverter
}

var customs = map[string]custom{}

// loadCRD adds the kind of the CRD in path, as the API server builds its field manager's schema
// (apiextensions-apiserver's buildOpenAPIModelsForApply: every version's OpenAPI, merged).
func loadCRD(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		return err
	}
	specs := []*spec3.OpenAPI{}
	storage := ""
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return err
		}
		specs = append(specs, s)
		if v.Storage {
			storage = v.Name
		}
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return err
	}
	tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return err
	}
	customs[crd.Spec.Names.Kind] = custom{schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.Kind}, tc}
	return nil
}

// A custom resource has no Go type: the API server converts, defaults and creates it unstructured.
type nopConvertor struct{}

func (nopConvertor) Convert(in, out, context interface{}) error { return fmt.Errorf("no conversion") }
func (nopConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	return in, nil
}
func (nopConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type nopDefaulter struct{}

func (nopDefaulter) Default(runtime.Object) {}

type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

type op struct {
	Op      string                 `json:"op"`
	Manager string                 `json:"manager"`
	Object  map[string]interface{} `json:"object"`
	Force   bool                   `json:"force,omitempty"` // an apply that takes what others own (--force-conflicts)
	// An update through a subresource ("scale": `kubectl scale`, an autoscaler): its manager's
	// entry records the subresource, as the API server's does.
	Subresource string `json:"subresource,omitempty"`
}

type testCase struct {
	Kind    string `json:"kind"`
	History []op   `json:"history"`
	Final   op     `json:"final"`
}

type conflict struct {
	Manager   string `json:"manager"`
	Operation string `json:"operation"`
	Field     string `json:"field"`
}

type answer struct {
	Live      map[string]interface{} `json:"live,omitempty"`
	Conflicts []conflict             `json:"conflicts"`
	Changed   bool                   `json:"changed"`
	Error     string                 `json:"error,omitempty"`
}

var kinds = map[string]schema.GroupVersionKind{
	"Deployment": {Group: "apps", Version: "v1", Kind: "Deployment"},
	"Service":    {Group: "", Version: "v1", Kind: "Service"},
}

// typed decodes an object into its Go type, as the API server stores it (a custom resource: as
// sent, a copy).
func typed(gvk schema.GroupVersionKind, obj map[string]interface{}) (runtime.Object, error) {
	if _, ok := kinds[gvk.Kind]; !ok {
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
		u.SetGroupVersionKind(gvk)
		return u, nil
	}
	out, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out, nil
}

func plain(obj runtime.Object) (map[string]interface{}, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	return out, json.Unmarshal(raw, &out)
}

// withoutManagedFields is an object's content: what a change changes.
func withoutManagedFields(obj map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range obj {
		out[k] = v
	}
	if m, ok := obj["metadata"].(map[string]interface{}); ok {
		md := map[string]interface{}{}
		for k, v := range m {
			if k != "managedFields" {
				md[k] = v
			}
		}
		out["metadata"] = md
	}
	return out
}

func judge(tc typeConverter, c testCase) answer {
	managers := map[string]*managedfields.FieldManager{}
	var live runtime.Object
	gvk, ok := kinds[c.Kind]
	cr, isCustom := customs[c.Kind]
	switch {
	case ok:
		for _, sub := range []string{"", "scale"} {
			fm, err := managedfields.NewDefaultFieldManager(tc, scheme.Scheme, scheme.Scheme, scheme.Scheme, gvk, gvk.GroupVersion(), sub, nil)
			if err != nil {
				return answer{Error: err.Error()}
			}
			managers[sub] = fm
		}
		created, err := scheme.Scheme.New(gvk)
		if err != nil {
			return answer{Error: err.Error()}
		}
		live = created
	case isCustom:
		gvk = cr.gvk
		fm, err := managedfields.NewDefaultCRDFieldManager(cr.tc, nopConvertor{}, nopDefaulter{}, unstructuredCreater{}, gvk, gvk.GroupVersion(), "", nil)
		if err != nil {
			return answer{Error: err.Error()}
		}
		managers[""] = fm
		live = &unstructured.Unstructured{Object: map[string]interface{}{}}
	default:
		return answer{Error: fmt.Sprintf("unknown kind %q", c.Kind)}
	}
	fm := managers[""]
	live.GetObjectKind().SetGroupVersionKind(gvk)
	for i, o := range c.History {
		next, err := step(managers[o.Subresource], gvk, live, o)
		if err != nil {
			return answer{Error: fmt.Sprintf("history %d (%s by %s): %v", i, o.Op, o.Manager, err)}
		}
		live = next
	}
	before, err := plain(live)
	if err != nil {
		return answer{Error: err.Error()}
	}
	out := answer{Live: before, Conflicts: []conflict{}}
	next, err := step(fm, gvk, live, c.Final)
	if err != nil {
		status, ok := err.(apierrors.APIStatus)
		if !ok || status.Status().Reason != metav1.StatusReasonConflict || status.Status().Details == nil {
			out.Error = err.Error()
			return out
		}
		for _, cause := range status.Status().Details.Causes {
			out.Conflicts = append(out.Conflicts, conflict{Manager: cause.Message, Field: cause.Field})
		}
		return out
	}
	after, err := plain(next)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Changed = !reflect.DeepEqual(withoutManagedFields(before), withoutManagedFields(after))
	return out
}

// step applies (or updates with) one object, as the API server would: an update's object is the
// typed object itself; an apply's is merged as sent, then decoded into its type.
func step(fm *managedfields.FieldManager, gvk schema.GroupVersionKind, live runtime.Object, o op) (runtime.Object, error) {
	if fm == nil {
		return nil, fmt.Errorf("no field manager for subresource %q", o.Subresource)
	}
	switch o.Op {
	case "apply":
		applied := &unstructured.Unstructured{Object: o.Object}
		next, err := fm.Apply(live, applied, o.Manager, o.Force)
		if err != nil {
			return nil, err
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
		if err != nil {
			return nil, err
		}
		return typed(gvk, content)
	case "update":
		next, err := typed(gvk, o.Object)
		if err != nil {
			return nil, err
		}

		// An update sends the whole object: it keeps the live managedFields (the server's rule).
		accessor, err := meta.Accessor(live)
		if err != nil {
			return nil, err
		}
		nextMeta, err := meta.Accessor(next)
		if err != nil {
			return nil, err
		}
		nextMeta.SetManagedFields(accessor.GetManagedFields())
		return fm.Update(live, next, o.Manager)
	}
	return nil, fmt.Errorf("unknown op %q", o.Op)
}

type typeConverter = managedfields.TypeConverter

// rule is how server-side apply treats one list or atomic map.
type rule struct {
	List string   `json:"list,omitempty"`
	Keys []string `json:"keys,omitempty"`
	Map  string   `json:"map,omitempty"`
}

// walk records the rule of every list and atomic map under tr, by dotted path.
func walk(s *smdschema.Schema, tr smdschema.TypeRef, path string, stack map[string]bool, out map[string]rule) {
	atom, ok := s.Resolve(tr)
	if !ok {
		return
	}
	if tr.NamedType != nil {
		if stack[*tr.NamedType] {
			return
		}
		stack[*tr.NamedType] = true
		defer delete(stack, *tr.NamedType)
	}
	switch {
	case atom.List != nil:
		r := rule{List: "atomic"}
		if atom.List.ElementRelationship == smdschema.Associative {
			if len(atom.List.Keys) > 0 {
				r = rule{List: "map", Keys: atom.List.Keys}
			} else {
				r = rule{List: "set"}
			}
		}
		out[path] = r
		if r.List != "atomic" {
			walk(s, atom.List.ElementType, path+"[]", stack, out)
		}
	case atom.Map != nil:
		if atom.Map.ElementRelationship == smdschema.Atomic {
			out[path] = rule{Map: "atomic"}
			return
		}
		for _, f := range atom.Map.Fields {
			walk(s, f.Type, path+"."+f.Name, stack, out)
		}
		if atom.Map.ElementType.NamedType != nil || atom.Map.ElementType.Inlined.List != nil || atom.Map.ElementType.Inlined.Map != nil {
			walk(s, atom.Map.ElementType, path+"[]", stack, out)
		}
	}
}

func schemas(tc typeConverter, names []string) error {
	out := map[string]map[string]rule{}
	for _, name := range names {
		var empty runtime.Object
		kindTC := tc
		if gvk, ok := kinds[name]; ok {
			created, err := scheme.Scheme.New(gvk)
			if err != nil {
				return err
			}
			created.GetObjectKind().SetGroupVersionKind(gvk)
			empty = created
		} else if cr, ok := customs[name]; ok {
			u := &unstructured.Unstructured{Object: map[string]interface{}{}}
			u.SetGroupVersionKind(cr.gvk)
			empty, kindTC = u, cr.tc
		} else {
			return fmt.Errorf("unknown kind %q", name)
		}
		tv, err := kindTC.ObjectToTyped(empty)
		if err != nil {
			return err
		}
		rules := map[string]rule{}
		walk(tv.Schema(), tv.TypeRef(), "", map[string]bool{}, rules)
		out[name] = rules
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func main() {
	tc := applyconfigurations.NewTypeConverter(scheme.Scheme)
	for len(os.Args) > 2 && os.Args[1] == "--crd" {
		if err := loadCRD(os.Args[2]); err != nil {
			fmt.Fprintf(os.Stderr, "--crd %s: %v\n", os.Args[2], err)
			os.Exit(2)
		}
		os.Args = append(os.Args[:1], os.Args[3:]...)
	}
	if len(os.Args) > 1 && os.Args[1] == "quantity" {
		// Each quantity (one per line on stdin) as the API server stores it, or "invalid".
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			q, err := resource.ParseQuantity(in.Text())
			if err != nil {
				fmt.Println("invalid")
				continue
			}
			fmt.Println(q.String())
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "schema" {
		if err := schemas(tc, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 1<<26)
	var lines [][]byte
	for in.Scan() {
		lines = append(lines, append([]byte(nil), in.Bytes()...))
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Every case on its own field manager: judged side by side, answered in order.
	answers := make([]answer, len(lines))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < goruntime.NumCPU(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var c testCase
				if err := json.Unmarshal(lines[i], &c); err != nil {
					answers[i] = answer{Error: "bad case: " + err.Error()}
					continue
				}
				answers[i] = judge(tc, c)
			}
		}()
	}
	for i := range lines {
		next <- i
	}
	close(next)
	wg.Wait()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for _, a := range answers {
		_ = enc.Encode(a)
	}
}
