package embedded

import "github.com/lethe-erasure/lethe/pkg/config"

// StandaloneConfig is the declared configuration of the standalone command: the services'
// Config, what a service process reads besides its clients, the keys (each optional there:
// a throwaway one, or none for the chain key, when unset) and where the embedded
// components listen. The settings of the components the stack replaces (the Kafka
// cluster, the Schema Registry's URL, the audit and data-key stores, the stores' clients
// and the metrics address) are not read.
type StandaloneConfig struct {
	Process  config.Process
	Keys     config.Keys
	Services Config
	Addrs    Addrs
}
