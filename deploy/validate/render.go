package validate

import (
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// RenderKustomization builds a kustomization directory in process (kustomize's own krusty
// library, the code behind `kustomize build` and `kubectl kustomize`) and returns the YAML
// stream.
func RenderKustomization(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return resources.AsYaml()
}
