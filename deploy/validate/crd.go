package validate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiextvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdVersion is one served version of one CRD, ready to validate objects.
type crdVersion struct {
	namespaced      bool
	preserveUnknown bool
	structural      *structuralschema.Structural
	validator       apiextvalidation.SchemaValidator
	cel             *cel.Validator
}

// LoadCRDFile loads every CustomResourceDefinition (apiextensions.k8s.io/v1) of a YAML file
// (strictly decoded) and returns how many it found; other documents are ignored.
func (v *Validator) LoadCRDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var readErr error
	n := 0
	for _, d := range SplitDocuments(bytes.NewReader(b), func(err error) { readErr = err }) {
		var tm struct{ Kind string }
		if err := yaml.Unmarshal(d.YAML, &tm); err != nil || tm.Kind != "CustomResourceDefinition" {
			continue
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(d.YAML, &crd); err != nil {
			return n, fmt.Errorf("%s: CRD: %w", path, err)
		}
		if err := v.AddCRD(&crd); err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
		n++
	}
	if readErr != nil {
		return n, fmt.Errorf("%s: %w", path, readErr)
	}
	return n, nil
}

// AddCRD registers every served version of crd.
func (v *Validator) AddCRD(crd *apiextv1.CustomResourceDefinition) error {
	for _, ver := range crd.Spec.Versions {
		if !ver.Served {
			continue
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
		if ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("%s: no openAPIV3Schema", gvk)
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(ver.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		st, err := structuralschema.NewStructural(internal)
		if err != nil {
			return fmt.Errorf("%s: structural schema: %w", gvk, err)
		}
		if errs := structuralschema.ValidateStructural(nil, st); len(errs) > 0 {
			return fmt.Errorf("%s: schema is not structural: %v", gvk, errs.ToAggregate())
		}
		sv, _, err := apiextvalidation.NewSchemaValidator(internal)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		v.crds[gvk] = &crdVersion{
			namespaced:      crd.Spec.Scope == apiextv1.NamespaceScoped,
			preserveUnknown: crd.Spec.PreserveUnknownFields,
			structural:      st,
			validator:       sv,
			cel:             cel.NewValidator(st, true, celconfig.PerCallLimit),
		}
	}
	return nil
}

// CRDKinds lists the apiVersion/kind pairs loaded from CRDs, sorted.
func (v *Validator) CRDKinds() []string {
	var out []string
	for gvk := range v.crds {
		out = append(out, gvk.GroupVersion().String()+"/"+gvk.Kind)
	}
	sort.Strings(out)
	return out
}

// validate does what kube-apiserver does on a create of a custom resource with
// fieldValidation=Strict: metadata coercion, pruning (unknown fields are errors), defaulting,
// metadata validation, OpenAPI schema validation and CEL rules. No admission webhook runs.
func (c *crdVersion) validate(js []byte) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return err
	}
	obj := u.Object
	var unknown []string

	meta, _, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return err
	}
	unknown = append(unknown, metaUnknown...)
	apiVersion, kind := u.GetAPIVersion(), u.GetKind()
	if !c.preserveUnknown {
		unknown = append(unknown, structuralpruning.PruneWithOptions(obj, c.structural, true,
			structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, c.structural)
	}
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, c.structural, false,
		schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		return ferr
	}
	unknown = append(unknown, paths...)
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
		return err
	}

	// kube-apiserver's wording for fieldValidation=Strict
	msgs := make([]string, 0, len(unknown))
	for _, p := range unknown {
		msgs = append(msgs, fmt.Sprintf("unknown field %q", p))
	}

	structuraldefaulting.Default(obj, c.structural)
	// Manifests usually leave the namespace to kubectl or kustomize.
	if c.namespaced && u.GetNamespace() == "" {
		u.SetNamespace("default")
	}
	var errs field.ErrorList
	errs = append(errs, metavalidation.ValidateObjectMetaAccessor(u, c.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, schemaobjectmeta.Validate(nil, obj, c.structural, true)...)
	errs = append(errs, apiextvalidation.ValidateCustomResource(nil, obj, c.validator)...)
	if c.cel != nil {
		celErrs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}
