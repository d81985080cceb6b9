//! One declaration per component's metrics: [`metric_set!`] writes the struct and its
//! `register` function from a single list of fields, each with its type, its name in the
//! registry and its help text, so a metric's name and help are stated once.

/// Declares a metrics struct (`Clone`, `Debug`, `Default`, every field public) and its
/// `register(registry: &mut Registry) -> Self`, which registers each field under its name
/// (below `prefix_`, when `in "prefix"` is given) with its help text. Fields listed after
/// `nested` are metric sets of their own, registered by their own `register` in the
/// component's registry before the others.
macro_rules! metric_set {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(in $prefix:literal)? {
            $( $(#[$fmeta:meta])* $field:ident: $ty:ty => $metric:literal, $help:literal; )*
        }
        $( nested { $( $(#[$nmeta:meta])* $nfield:ident: $nty:ty; )* } )?
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
            $( $( $(#[$nmeta])* pub $nfield: $nty, )* )?
        }

        impl $name {
            /// Registers the metrics in `registry` (the agent's `kerf_agent` registry).
            pub fn register(
                registry: &mut prometheus_client::registry::Registry,
            ) -> $name {
                let m = $name {
                    $( $( $nfield: <$nty>::register(registry), )* )?
                    ..$name::default()
                };
                let r = registry;
                $( let r = r.sub_registry_with_prefix($prefix); )?
                $( r.register($metric, $help, m.$field.clone()); )*
                m
            }
        }
    };
}

pub(crate) use metric_set;
