package mesh_test

import dto "github.com/prometheus/client_model/go"

type dtoMetric struct{ dto.Metric }
