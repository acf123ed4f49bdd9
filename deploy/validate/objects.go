package validate

import (
	"bytes"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// ServingRuntime is the part of KServe's (Cluster)ServingRuntime that the project checks read.
// Field names are KServe's; the schema itself is checked against the CRD.
type ServingRuntime struct {
	Kind     string            `json:"kind"`
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Annotations           map[string]string `json:"annotations"`
		MultiModel            *bool             `json:"multiModel"`
		ProtocolVersions      []string          `json:"protocolVersions"`
		SupportedModelFormats []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"supportedModelFormats"`
		Containers []corev1.Container `json:"containers"`
		Volumes    []corev1.Volume    `json:"volumes"`
	} `json:"spec"`
}

// InferenceService is the part of KServe's InferenceService that the project checks read.
type InferenceService struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Predictor struct {
			TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
			AutoScaling                   *struct {
				Metrics []struct {
					External *struct {
						Metric struct {
							Query string `json:"query"`
						} `json:"metric"`
					} `json:"external"`
				} `json:"metrics"`
			} `json:"autoScaling"`
			Model *struct {
				ModelFormat struct {
					Name string `json:"name"`
				} `json:"modelFormat"`
				Runtime         string                 `json:"runtime"`
				ProtocolVersion string                 `json:"protocolVersion"`
				StorageURI      *string                `json:"storageUri"`
				Ports           []corev1.ContainerPort `json:"ports"`
			} `json:"model"`
		} `json:"predictor"`
	} `json:"spec"`
}

// TrainedModel is KServe's TrainedModel.
type TrainedModel struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		InferenceService string `json:"inferenceService"`
		Model            struct {
			Framework  string `json:"framework"`
			StorageURI string `json:"storageUri"`
		} `json:"model"`
	} `json:"spec"`
}

// ScaledObject is the part of KEDA's ScaledObject that the project checks read.
type ScaledObject struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		Triggers []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// Objects are the documents of one manifest set (a file tree or a rendered kustomization),
// decoded for the cross-object checks. Decoding here is lenient: strictness is Validate's job.
type Objects struct {
	Deployments       []appsv1.Deployment
	Services          []corev1.Service
	ConfigMaps        []corev1.ConfigMap
	PDBs              []policyv1.PodDisruptionBudget
	HPAs              []autoscalingv2.HorizontalPodAutoscaler
	Runtimes          []ServingRuntime
	InferenceServices []InferenceService
	TrainedModels     []TrainedModel
	ScaledObjects     []ScaledObject
}

// Add decodes every document of a YAML stream into the slice for its kind; kinds without a
// slice are ignored.
func (o *Objects) Add(stream []byte) error {
	var readErr error
	for _, d := range SplitDocuments(bytes.NewReader(stream), func(err error) { readErr = err }) {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(d.YAML, &tm); err != nil {
			return err
		}
		var err error
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/Deployment":
			err = decodeInto(d.YAML, &o.Deployments)
		case "v1/Service":
			err = decodeInto(d.YAML, &o.Services)
		case "v1/ConfigMap":
			err = decodeInto(d.YAML, &o.ConfigMaps)
		case "policy/v1/PodDisruptionBudget":
			err = decodeInto(d.YAML, &o.PDBs)
		case "autoscaling/v2/HorizontalPodAutoscaler":
			err = decodeInto(d.YAML, &o.HPAs)
		case "serving.kserve.io/v1alpha1/ServingRuntime", "serving.kserve.io/v1alpha1/ClusterServingRuntime":
			err = decodeInto(d.YAML, &o.Runtimes)
		case "serving.kserve.io/v1beta1/InferenceService":
			err = decodeInto(d.YAML, &o.InferenceServices)
		case "serving.kserve.io/v1alpha1/TrainedModel":
			err = decodeInto(d.YAML, &o.TrainedModels)
		case "keda.sh/v1alpha1/ScaledObject":
			err = decodeInto(d.YAML, &o.ScaledObjects)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", Describe(d.YAML), err)
		}
	}
	return readErr
}

func decodeInto[T any](doc []byte, list *[]T) error {
	var v T
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }
