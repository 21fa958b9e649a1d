//! `az://container/prefix` (and `azure://`): Azure Blob Storage or the Azurite emulator,
//! options `azure.*`.

use std::sync::Arc;

use object_store::azure::{AzureConfigKey, MicrosoftAzure, MicrosoftAzureBuilder};
use url::Url;

use crate::error::Result;
use crate::factory::StorageFactory;
use crate::location::{bucket_and_prefix, invalid};
use crate::object::ObjectStoreStorage;
use crate::options::{OptionSpec, StorageOptions};
use crate::storage::Storage;

/// The `azure.*` options.
const OPTIONS: [OptionSpec; 12] = [
    OptionSpec::plain("account"),
    OptionSpec::secret("access-key"),
    OptionSpec::secret("sas-token"),
    OptionSpec::secret("bearer-token"),
    OptionSpec::plain("client-id"),
    OptionSpec::secret("client-secret"),
    OptionSpec::plain("tenant-id"),
    OptionSpec::plain("endpoint"),
    OptionSpec::plain("use-emulator"),
    OptionSpec::plain("allow-http"),
    OptionSpec::plain("anonymous"),
    OptionSpec::plain("ambient-credentials"),
];

/// Opens `az://` and `azure://` locations.
pub(crate) struct AzureFactory;

impl StorageFactory for AzureFactory {
    fn option_namespace(&self) -> Option<&str> {
        Some("azure")
    }

    fn options(&self) -> &[OptionSpec] {
        &OPTIONS
    }

    fn open(&self, url: &Url, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
        let (container, prefix) = bucket_and_prefix(url)?;
        Ok(Arc::new(ObjectStoreStorage::azure(
            &container, &prefix, options,
        )?))
    }
}

impl ObjectStoreStorage {
    /// A storage over Azure Blob container `container` rooted at `prefix` (may be empty),
    /// configured from the `azure.*` keys of `options`, with conditional writes
    /// (`If-None-Match: *` / `If-Match: <etag>`). `Display` shows `az://container/prefix`.
    ///
    /// - `azure.use-emulator=true`: the Azurite emulator with its well-known account
    ///   `devstoreaccount1` and key (unless `azure.account` / `azure.access-key` say otherwise),
    ///   over plain http at `http://127.0.0.1:10000`. That address is the one place where the
    ///   environment counts: object_store takes it from `AZURITE_BLOB_STORAGE_URL` when set, so
    ///   `azure.endpoint` is refused together with the emulator.
    /// - otherwise `azure.account` is required, and one credential: `azure.access-key`,
    ///   `azure.sas-token`, `azure.bearer-token`, `azure.client-id` + `azure.client-secret` +
    ///   `azure.tenant-id`, or `azure.anonymous=true` (unsigned requests), or
    ///   `azure.ambient-credentials=true` (the managed identity of the machine). Without any,
    ///   opening fails rather than guessing. `azure.endpoint` replaces
    ///   `https://<account>.blob.core.windows.net`; a plain `http://` one needs
    ///   `azure.allow-http=true`.
    pub fn azure(container: &str, prefix: &str, options: &StorageOptions) -> Result<Self> {
        let store = build_azure(container, options)?;
        let prefix = prefix.trim_matches('/');
        let url = if prefix.is_empty() {
            format!("az://{container}")
        } else {
            format!("az://{container}/{prefix}")
        };
        // Azure lists ETags bare but returns them quoted everywhere else.
        Ok(Self::new(Arc::new(store), prefix, url)?
            .with_sorted_listing(true)
            .with_quoted_listed_etags(true))
    }
}

/// Builds the Azure client for `container` from `options` alone.
fn build_azure(container: &str, options: &StorageOptions) -> Result<MicrosoftAzure> {
    let url = format!("az://{container}");
    if container.is_empty() {
        return Err(invalid(&url, "missing container name"));
    }
    options.check_namespace("azure", &OPTIONS)?;
    let get = |name: &str| options.get(&format!("azure.{name}"));
    let flag = |name: &str| -> Result<bool> {
        Ok(options.get_bool(&format!("azure.{name}"))?.unwrap_or(false))
    };
    let emulator = flag("use-emulator")?;
    let allow_http = flag("allow-http")? || emulator;
    let mut b = MicrosoftAzureBuilder::new()
        .with_container_name(container)
        .with_allow_http(allow_http)
        .with_use_emulator(emulator);
    if let Some(account) = get("account") {
        b = b.with_account(account);
    } else if !emulator {
        return Err(invalid(
            &url,
            "no Azure account: set azure.account (or azure.use-emulator=true for Azurite)",
        ));
    }
    if let Some(endpoint) = get("endpoint") {
        if emulator {
            return Err(invalid(
                &url,
                "azure.endpoint cannot be combined with azure.use-emulator (the emulator's \
                 address is http://127.0.0.1:10000, or AZURITE_BLOB_STORAGE_URL)",
            ));
        }
        if endpoint.starts_with("http://") && !allow_http {
            return Err(invalid(
                &url,
                format!("endpoint {endpoint} is plain http but azure.allow-http is not set"),
            ));
        }
        b = b.with_endpoint(endpoint.to_string());
    }
    let mut credential = false;
    if let Some(key) = get("access-key") {
        b = b.with_access_key(key);
        credential = true;
    }
    if let Some(sas) = get("sas-token") {
        b = b.with_config(AzureConfigKey::SasKey, sas);
        credential = true;
    }
    if let Some(token) = get("bearer-token") {
        b = b.with_bearer_token_authorization(token);
        credential = true;
    }
    match (get("client-id"), get("client-secret"), get("tenant-id")) {
        (Some(id), Some(secret), Some(tenant)) => {
            b = b.with_client_secret_authorization(id, secret, tenant);
            credential = true;
        }
        (None, None, None) => {}
        _ => {
            return Err(invalid(
                &url,
                "azure.client-id, azure.client-secret and azure.tenant-id must be given together",
            ))
        }
    }
    if flag("anonymous")? {
        b = b.with_skip_signature(true);
        credential = true;
    }
    if !credential && !emulator && !flag("ambient-credentials")? {
        return Err(invalid(
            &url,
            "no Azure credentials: set azure.access-key, azure.sas-token, azure.bearer-token, \
             azure.client-id + azure.client-secret + azure.tenant-id, azure.anonymous=true or \
             azure.ambient-credentials=true (or azure.use-emulator=true for Azurite)",
        ));
    }
    b.build().map_err(|e| invalid(&url, e.to_string()))
}

#[cfg(test)]
mod tests {
    use crate::{open_storage, StorageOptions};

    fn opts(pairs: &[(&str, &str)]) -> StorageOptions {
        StorageOptions::from_pairs(pairs.iter().copied()).unwrap()
    }

    #[test]
    fn test_azure_options_are_checked() {
        let err = open_storage("az://c/t", &StorageOptions::default()).unwrap_err();
        assert!(err.to_string().contains("azure.account"), "{err}");
        let err = open_storage("az://c/t", &opts(&[("azure.account", "a")])).unwrap_err();
        assert!(err.to_string().contains("credentials"), "{err}");
        let s = open_storage("az://c/t/", &opts(&[("azure.use-emulator", "true")])).unwrap();
        assert_eq!(s.to_string(), "az://c/t");
        let s = open_storage("azure://c", &opts(&[("azure.use-emulator", "yes")])).unwrap();
        assert_eq!(s.to_string(), "az://c");
        let both = [
            ("azure.use-emulator", "true"),
            ("azure.endpoint", "http://x"),
        ];
        assert!(open_storage("az://c", &opts(&both)).is_err());
        let partial = [("azure.account", "a"), ("azure.client-id", "i")];
        assert!(open_storage("az://c", &opts(&partial)).is_err());
        let err = StorageOptions::from_pairs([("azure.use_emulatorr", "1")]).unwrap_err();
        assert!(err.to_string().contains("azure.use-emulator"), "{err}");
        let secret = opts(&[("azure.access-key", "c2VjcmV0"), ("azure.account", "a")]);
        assert!(!format!("{secret:?}").contains("c2VjcmV0"));
        assert!(open_storage("az://c", &secret).is_ok());
    }
}
