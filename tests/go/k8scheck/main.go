// k8scheck decodes every object of the Kubernetes manifests it is given strictly into the
// official k8s.io/api types (an unknown or duplicate field, a wrong type or a bad quantity is an
// error), checks what the API server would refuse of the objects' selectors, and prints one JSON
// line per object (kind, name, and the object as decoded) for the tests to read.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// newObject is the typed object of an apiVersion and kind this project ships.
func newObject(meta metav1.TypeMeta) (any, error) {
	switch meta.APIVersion + "/" + meta.Kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "rbac.authorization.k8s.io/v1/Role":
		return &rbacv1.Role{}, nil
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		return &rbacv1.RoleBinding{}, nil
	}
	return nil, fmt.Errorf("unknown apiVersion/kind %s %s", meta.APIVersion, meta.Kind)
}

// checkSelectors refuses what the API server refuses: a selector that does not select the
// pod template's labels, a label selector that does not parse.
func checkSelectors(object any) error {
	switch o := object.(type) {
	case *appsv1.Deployment:
		selector, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
		if err != nil {
			return err
		}
		if selector.Empty() || !selector.Matches(labels.Set(o.Spec.Template.Labels)) {
			return fmt.Errorf("deployment %s: selector does not match the template's labels", o.Name)
		}
	case *policyv1.PodDisruptionBudget:
		if _, err := metav1.LabelSelectorAsSelector(o.Spec.Selector); err != nil {
			return err
		}
	}
	return nil
}

func check(path string, out *json.Encoder) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	for index := 0; ; index++ {
		doc, err := reader.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, index, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, index, err)
		}
		object, err := newObject(meta)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, index, err)
		}
		if err := yaml.UnmarshalStrict(doc, object); err != nil {
			return fmt.Errorf("%s: document %d (%s): %w", path, index, meta.Kind, err)
		}
		if err := checkSelectors(object); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, index, err)
		}
		if err := out.Encode(map[string]any{"file": path, "kind": meta.Kind, "object": object}); err != nil {
			return err
		}
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k8scheck MANIFEST.yaml ...")
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, path := range os.Args[1:] {
		if err := check(path, out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
