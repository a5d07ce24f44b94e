//! Link events of a run: every change of the lab's links (a `lab set`, a schedule line, a
//! partition and its end) that happened while the run was measured, or that was still in
//! force when it started (a link down before the run began), with its time on the run's
//! own clock, so exporters lay them over the run's time series. Stored in `run_events`
//! (store version 4).

use rusqlite::{Transaction, params};

use super::Store;
use crate::error::StoreError;
use crate::model::RunEvent;

/// Writes the events of run `run_id` inside the run's transaction.
pub(crate) fn write(
    tx: &Transaction<'_>,
    run_id: i64,
    events: &[RunEvent],
) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO run_events (run_id, at_s, t_unix_ns, source, kind, text, directions_json,
         until_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for e in events {
        st.execute(params![
            run_id,
            e.at_s,
            e.t_unix_ns as i64,
            e.source.to_string(),
            e.kind.to_string(),
            e.text,
            serde_json::to_string(&e.directions).unwrap_or_default(),
            e.until_s,
        ])?;
    }
    Ok(())
}

impl Store {
    /// The link events of one run, in time order (empty for a run outside a lab, and for
    /// stores written before version 4).
    pub fn events(&self, run_id: i64) -> Result<Vec<RunEvent>, StoreError> {
        let mut st = self
            .conn()
            .prepare_cached(
                "SELECT at_s, t_unix_ns, source, kind, text, directions_json, until_s
                 FROM run_events WHERE run_id = ?1 ORDER BY t_unix_ns, rowid",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok((
                    r.get::<_, f64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, Option<f64>>(6)?,
                ))
            })
            .map_err(|e| self.sqlite(e))?;
        let mut v = Vec::new();
        for row in rows {
            let (at_s, t, source, kind, text, dirs, until_s) = row.map_err(|e| self.sqlite(e))?;
            let bad = |what: String| StoreError::Corrupt(format!("{what} in run {run_id}"));
            v.push(RunEvent {
                at_s,
                t_unix_ns: t.max(0) as u64,
                source: source.parse().map_err(bad)?,
                kind: kind.parse().map_err(bad)?,
                text,
                directions: serde_json::from_str(&dirs)
                    .map_err(|e| bad(format!("event directions: {e}")))?,
                until_s,
            });
        }
        Ok(v)
    }
}
