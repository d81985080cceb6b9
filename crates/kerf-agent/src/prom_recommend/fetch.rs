//! The requests of one batch to Prometheus, each within the query timeout, and the
//! classification of their failures.

use chrono::{DateTime, Utc};
use prometheus_http_query::response::Data;

use super::{Answer, BatchQueries, PromError, PromSettings, Usage};

/// One namespace's requests.
pub(super) struct Call<'a> {
    pub(super) client: &'a prometheus_http_query::Client,
    pub(super) namespace: &'a str,
    pub(super) settings: &'a PromSettings,
    pub(super) now: DateTime<Utc>,
}

impl Call<'_> {
    fn url(&self) -> String {
        self.client.base_url().to_string()
    }

    /// The number of raw series the batch's queries would read in the window (an index
    /// lookup, not a read of samples).
    pub(super) async fn count_series(&self, q: &BatchQueries) -> Result<usize, PromError> {
        let window = chrono::Duration::from_std(self.settings.window).unwrap_or_default();
        let request = self
            .client
            .series(q.selectors())
            .map_err(|e| self.error(e))?
            .start((self.now - window).timestamp())
            .end(self.now.timestamp());
        Ok(self.bounded(request.get()).await?.len())
    }

    /// Runs one instant query at `now` (POST: the regexes make long queries) and records
    /// its series.
    pub(super) async fn read(
        &self,
        query: &str,
        answer: Answer,
        usage: &mut Usage,
    ) -> Result<(), PromError> {
        let timeout_ms = i64::try_from(self.settings.query_timeout.as_millis()).unwrap_or(i64::MAX);
        let request = self
            .client
            .query(query)
            .at(self.now.timestamp())
            .timeout(timeout_ms)
            .post();
        let result = self.bounded(request).await?;
        match result.data() {
            Data::Vector(v) => {
                for s in v {
                    usage.record(answer, s.metric(), s.sample().value());
                }
                Ok(())
            }
            Data::Matrix(_) => Err(self.unexpected("range vector")),
            Data::Scalar(_) => Err(self.unexpected("scalar")),
        }
    }

    /// Waits for `request` at most the query timeout.
    async fn bounded<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, prometheus_http_query::Error>>,
    ) -> Result<T, PromError> {
        match tokio::time::timeout(self.settings.query_timeout, request).await {
            Ok(answer) => answer.map_err(|e| self.error(e)),
            Err(_) => Err(PromError::Timeout {
                url: self.url(),
                namespace: self.namespace.to_owned(),
                timeout: crate::settings::format_duration(self.settings.query_timeout),
            }),
        }
    }

    fn error(&self, e: prometheus_http_query::Error) -> PromError {
        match e {
            prometheus_http_query::Error::Prometheus(p) => PromError::Refused {
                url: self.url(),
                namespace: self.namespace.to_owned(),
                message: p.to_string(),
            },
            other => PromError::Unreachable {
                url: self.url(),
                message: error_chain(&other),
            },
        }
    }

    fn unexpected(&self, shape: &'static str) -> PromError {
        PromError::UnexpectedAnswer {
            url: self.url(),
            namespace: self.namespace.to_owned(),
            shape,
        }
    }
}

/// An error and its sources, joined with `: ` (reqwest's top error alone says little).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}
