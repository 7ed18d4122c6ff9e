//! Kubernetes API server emulator.
