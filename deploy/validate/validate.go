// Package validate checks visionserve's Kubernetes manifests against the real API types,
// without a cluster.
//
// Two mechanisms, picked per apiVersion/kind:
//
//   - Built-in kinds (apps/v1 Deployment, v1 Service, autoscaling/v2 HPA, ...) are decoded by
//     k8s.io/apimachinery's strict serializer into the k8s.io/api Go types: the decoder
//     kube-apiserver runs for fieldValidation=Strict. Unknown fields (case-sensitive),
//     duplicate keys and type mismatches are errors.
//   - Custom resources (KServe, KEDA) are checked against the CustomResourceDefinitions that
//     the operators generate from their Go types, with k8s.io/apiextensions-apiserver's own
//     code: structural schema, pruning (unknown fields), OpenAPI v3 validation (types, enums,
//     required, patterns, bounds) and CEL x-kubernetes-validations rules.
//
// A document whose apiVersion/kind neither knows is an error: the validator fails closed.
package validate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Validator holds the built-in kinds of the k8s.io/api version this module is built with and
// the loaded CRDs.
type Validator struct {
	scheme     *runtime.Scheme
	strict     *json.Serializer
	crds       map[schema.GroupVersionKind]*crdVersion
	skip       map[schema.GroupVersionKind]bool
	allowPreGA map[schema.GroupVersion]bool
}

var gaVersion = regexp.MustCompile(`^v[0-9]+$`)

// New returns a Validator that knows every built-in kind and no custom resource.
func New() (*Validator, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return &Validator{
		scheme: s,
		strict: json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s,
			json.SerializerOptions{Yaml: true, Strict: true}),
		crds:       map[schema.GroupVersionKind]*crdVersion{},
		skip:       map[schema.GroupVersionKind]bool{},
		allowPreGA: map[schema.GroupVersion]bool{},
	}, nil
}

// Skip accepts documents of this kind unchecked (kustomize's own Kustomization files).
func (v *Validator) Skip(apiVersion, kind string) {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	v.skip[gv.WithKind(kind)] = true
}

// AllowPreGA accepts built-in kinds of an alpha/beta group version. k8s.io/api still has Go
// types for versions that current API servers no longer serve (autoscaling/v2beta2,
// policy/v1beta1), so they are refused unless allowed here.
func (v *Validator) AllowPreGA(apiVersion string) {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	v.allowPreGA[gv] = true
}

// DocError is one problem in one YAML document of a stream.
type DocError struct {
	Source string // file name or render label
	Index  int    // 0-based document index in the stream
	Object string // apiVersion/kind "name"
	Err    error
}

func (e *DocError) Error() string {
	return fmt.Sprintf("%s[doc %d] %s: %v", e.Source, e.Index, e.Object, e.Err)
}

func (e *DocError) Unwrap() error { return e.Err }

// ValidateFile validates every document of a (multi-document) YAML file and returns the
// errors and the number of non-empty documents.
func (v *Validator) ValidateFile(path string) ([]error, int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return []error{err}, 0
	}
	return v.ValidateStream(path, bytes.NewReader(b))
}

// ValidateStream validates every document read from r and returns the errors and the number
// of non-empty documents.
func (v *Validator) ValidateStream(source string, r io.Reader) ([]error, int) {
	var errs []error
	n := 0
	for _, d := range SplitDocuments(r, func(err error) { errs = append(errs, err) }) {
		n++
		if err := v.ValidateDoc(d.YAML); err != nil {
			errs = append(errs, &DocError{source, d.Index, Describe(d.YAML), err})
		}
	}
	return errs, n
}

// Document is one non-empty document of a YAML stream.
type Document struct {
	Index int // 0-based position in the stream
	YAML  []byte
}

// SplitDocuments returns the non-empty documents of a YAML stream in order; a read error is
// passed to onError and ends the stream.
func SplitDocuments(r io.Reader, onError func(error)) []Document {
	var out []Document
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for idx := 0; ; idx++ {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			onError(fmt.Errorf("document %d: %w", idx, err))
			return out
		}
		if !isEmptyDoc(doc) {
			out = append(out, Document{idx, doc})
		}
	}
}

// ValidateDoc validates one YAML (or JSON) document.
func (v *Validator) ValidateDoc(doc []byte) error {
	// YAMLToJSONStrict rejects duplicate keys (kubectl's conversion silently keeps the last
	// one, so the API server never sees them); both paths below read the same JSON.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(js, &tm); err != nil {
		return err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return errors.New("apiVersion and kind are required")
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return err
	}
	gvk := gv.WithKind(tm.Kind)
	if v.skip[gvk] {
		return nil
	}
	if c, ok := v.crds[gvk]; ok {
		return c.validate(js)
	}
	if v.scheme.Recognizes(gvk) {
		if !gaVersion.MatchString(gvk.Version) && !v.allowPreGA[gvk.GroupVersion()] {
			return fmt.Errorf("%s is not a GA API version; not accepted for built-in kinds", gvk.GroupVersion())
		}
		_, _, err := v.strict.Decode(js, nil, nil)
		return err
	}
	return fmt.Errorf("unknown apiVersion/kind %s (not a built-in type and no CRD loaded)", gvk)
}

func isEmptyDoc(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := strings.TrimSpace(string(line))
		if t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

// Describe names a document as `apiVersion/kind "name"` for error messages.
func Describe(doc []byte) string {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = yaml.Unmarshal(doc, &m)
	return fmt.Sprintf("%s/%s %q", m.APIVersion, m.Kind, m.Metadata.Name)
}
