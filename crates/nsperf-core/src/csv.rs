//! CSV as nsperf writes it, everywhere (`--csv` of every command, the iozone spreadsheet
//! layout, the experiment export): RFC 4180 — fields holding a comma, a double quote or a
//! line break are quoted, quotes doubled, records end in CRLF. Built on the `csv` crate.

/// A CSV document built in memory, record by record.
#[derive(Debug, Default, Clone)]
pub struct CsvWriter {
    out: Vec<u8>,
}

impl CsvWriter {
    /// An empty document. Records may have different numbers of fields (the iozone layout
    /// has title lines between its blocks).
    pub fn new() -> CsvWriter {
        CsvWriter::default()
    }

    /// Appends one record.
    pub fn record<I, S>(&mut self, fields: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::CRLF)
            .buffer_capacity(512)
            .from_writer(std::mem::take(&mut self.out));
        // Writing into a Vec cannot fail, and a writer of one record has no record length
        // to keep.
        let _ = w.write_record(fields);
        self.out = match w.into_inner() {
            Ok(b) => b,
            Err(e) => e.into_inner().get_ref().clone(),
        };
    }

    /// Appends an empty line (a separator between blocks, as in iozone's spreadsheet layout;
    /// readers take it for no record).
    pub fn blank_line(&mut self) {
        self.out.extend_from_slice(b"\r\n");
    }

    /// The document.
    pub fn into_string(self) -> String {
        // Every field came in as text and the writer adds only ASCII.
        String::from_utf8(self.out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// One record as a CSV line (CRLF-terminated), for writers that stream rows as they come.
pub fn line<I, S>(fields: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<[u8]>,
{
    let mut w = CsvWriter::new();
    w.record(fields);
    w.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_commas_quotes_and_line_breaks() {
        let mut w = CsvWriter::new();
        w.record(["name", "value"]);
        w.record(["a, \"b\"\nc", "1"]);
        w.blank_line();
        w.record(["plain"]);
        assert_eq!(
            w.into_string(),
            "name,value\r\n\"a, \"\"b\"\"\nc\",1\r\n\r\nplain\r\n"
        );
        assert_eq!(line(["x", "", "y"]), "x,,y\r\n");
    }

    #[test]
    fn the_document_reads_back() {
        let field = "comma, quote \" and\r\nnewline";
        let doc = line(["before", field, "after"]);
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(doc.as_bytes());
        let rec = r.records().next().unwrap().unwrap();
        assert_eq!(rec.iter().collect::<Vec<_>>(), ["before", field, "after"]);
    }
}
