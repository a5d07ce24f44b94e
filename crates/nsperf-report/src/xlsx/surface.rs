//! The iozone surface (file size × record size × throughput) as a native spreadsheet chart.
//!
//! rust_xlsxwriter has no surface chart type: the iozone sheet gets a placeholder chart of the
//! same cells (a line chart titled with a key unique in the workbook) and, once the workbook is
//! written, that chart's part (`xl/charts/chartN.xml`, found by its key) is replaced with a
//! `surface3DChart` over the same cells (ECMA-376 Part 1, §21.2.2.204: file sizes as series,
//! record sizes as categories, throughput up, with the cached values). The rest of the package
//! (relationships, drawing anchors, content types) is rust_xlsxwriter's, untouched.

use std::fmt::Write as _;
use std::io::{Cursor, Read, Write};

use rust_xlsxwriter::worksheet_range_absolute;

use crate::ReportError;
use crate::svg::esc;

/// The surface of one iozone sheet: its matrix starts at A1 (record sizes across row 1 from
/// B1, file sizes down column A from A2).
#[derive(Debug, Clone)]
pub(super) struct Surface {
    /// The placeholder chart's title: a key unique in the workbook, of letters, digits and
    /// spaces only (so it reads the same escaped).
    pub(super) key: String,
    /// The surface's title.
    pub(super) title: String,
    /// The sheet holding the matrix.
    pub(super) sheet: String,
    /// File sizes (series), as written in column A.
    pub(super) rows: Vec<String>,
    /// Record sizes (categories), as written in row 1.
    pub(super) cols: Vec<String>,
    /// `values[row][col]`, as written in the cells.
    pub(super) values: Vec<Vec<Option<f64>>>,
    /// The value axis' title, with its unit.
    pub(super) value_label: String,
}

/// `<c:title>` with `text`.
fn title(out: &mut String, text: &str) {
    let _ = write!(
        out,
        "<c:title><c:tx><c:rich><a:bodyPr/><a:lstStyle/><a:p><a:pPr><a:defRPr/></a:pPr><a:r><a:t>{}</a:t></a:r></a:p></c:rich></c:tx><c:overlay val=\"0\"/></c:title>",
        esc(text)
    );
}

/// A `<c:strRef>` to `range` with its cached strings.
fn str_ref(out: &mut String, range: &str, pts: &[String]) {
    let _ = write!(
        out,
        "<c:strRef><c:f>{}</c:f><c:strCache><c:ptCount val=\"{}\"/>",
        esc(range),
        pts.len()
    );
    for (i, p) in pts.iter().enumerate() {
        let _ = write!(out, "<c:pt idx=\"{i}\"><c:v>{}</c:v></c:pt>", esc(p));
    }
    out.push_str("</c:strCache></c:strRef>");
}

/// One series of the surface: the file size of row `r`.
fn series(out: &mut String, s: &Surface, r: usize) {
    let row = 1 + r as u32;
    let nc = s.cols.len() as u16;
    let _ = write!(
        out,
        "<c:ser><c:idx val=\"{r}\"/><c:order val=\"{r}\"/><c:tx>"
    );
    str_ref(
        out,
        &worksheet_range_absolute(&s.sheet, row, 0, row, 0),
        std::slice::from_ref(&s.rows[r]),
    );
    out.push_str("</c:tx><c:cat>");
    str_ref(
        out,
        &worksheet_range_absolute(&s.sheet, 0, 1, 0, nc),
        &s.cols,
    );
    let _ = write!(
        out,
        "</c:cat><c:val><c:numRef><c:f>{}</c:f><c:numCache><c:formatCode>General</c:formatCode><c:ptCount val=\"{}\"/>",
        esc(&worksheet_range_absolute(&s.sheet, row, 1, row, nc)),
        s.cols.len()
    );
    for (i, v) in s.values[r].iter().enumerate() {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            let _ = write!(out, "<c:pt idx=\"{i}\"><c:v>{v}</c:v></c:pt>");
        }
    }
    out.push_str("</c:numCache></c:numRef></c:val></c:ser>");
}

/// An axis: `kind` (`catAx`, `valAx`, `serAx`), its id, position, title, the axis it
/// crosses, and what follows `crosses` in its schema order.
fn axis(out: &mut String, kind: &str, (id, cross): (u32, u32), pos: &str, name: &str, tail: &str) {
    let _ = write!(
        out,
        "<c:{kind}><c:axId val=\"{id}\"/><c:scaling><c:orientation val=\"minMax\"/></c:scaling><c:delete val=\"0\"/><c:axPos val=\"{pos}\"/>"
    );
    if kind == "valAx" {
        out.push_str("<c:majorGridlines/>");
    }
    title(out, name);
    if kind == "valAx" {
        out.push_str("<c:numFmt formatCode=\"General\" sourceLinked=\"1\"/>");
    }
    let _ = write!(
        out,
        "<c:majorTickMark val=\"out\"/><c:minorTickMark val=\"none\"/><c:tickLblPos val=\"nextTo\"/><c:crossAx val=\"{cross}\"/><c:crosses val=\"autoZero\"/>{tail}</c:{kind}>"
    );
}

/// The chart part of a surface: a complete `chartSpace`.
pub(super) fn chart_xml(s: &Surface) -> String {
    const CAT: u32 = 50010001;
    const VAL: u32 = 50010002;
    const SER: u32 = 50010003;
    let mut o = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\r\n<c:chartSpace xmlns:c=\"http://schemas.openxmlformats.org/drawingml/2006/chart\" xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\"><c:lang val=\"en-US\"/><c:chart>",
    );
    title(&mut o, &s.title);
    o.push_str("<c:autoTitleDeleted val=\"0\"/><c:view3D><c:rotX val=\"15\"/><c:rotY val=\"20\"/><c:rAngAx val=\"0\"/><c:perspective val=\"30\"/></c:view3D><c:plotArea><c:layout/><c:surface3DChart><c:wireframe val=\"0\"/>");
    for r in 0..s.rows.len() {
        series(&mut o, s, r);
    }
    let _ = write!(
        o,
        "<c:axId val=\"{CAT}\"/><c:axId val=\"{VAL}\"/><c:axId val=\"{SER}\"/></c:surface3DChart>"
    );
    axis(
        &mut o,
        "catAx",
        (CAT, VAL),
        "b",
        "record size",
        "<c:auto val=\"1\"/><c:lblAlgn val=\"ctr\"/><c:lblOffset val=\"100\"/><c:noMultiLvlLbl val=\"0\"/>",
    );
    axis(
        &mut o,
        "valAx",
        (VAL, CAT),
        "l",
        &s.value_label,
        "<c:crossBetween val=\"midCat\"/>",
    );
    axis(&mut o, "serAx", (SER, VAL), "b", "file size", "");
    o.push_str("</c:plotArea><c:legend><c:legendPos val=\"r\"/><c:overlay val=\"0\"/></c:legend><c:plotVisOnly val=\"1\"/><c:dispBlanksAs val=\"gap\"/></c:chart></c:chartSpace>");
    o
}

fn zip_err(e: impl std::fmt::Display) -> ReportError {
    ReportError::Xlsx(format!("surface chart: {e}"))
}

/// The workbook `xlsx` with the chart part of each surface's placeholder (the chart titled
/// with its key) replaced by the surface; an error if one is not found.
pub(super) fn replace_placeholders(
    xlsx: Vec<u8>,
    surfaces: &[Surface],
) -> Result<Vec<u8>, ReportError> {
    if surfaces.is_empty() {
        return Ok(xlsx);
    }
    let mut zin = zip::ZipArchive::new(Cursor::new(xlsx)).map_err(zip_err)?;
    let mut zout = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut found = vec![false; surfaces.len()];
    for i in 0..zin.len() {
        let mut f = zin.by_index(i).map_err(zip_err)?;
        let name = f.name().map_err(zip_err)?.into_owned();
        if !(name.starts_with("xl/charts/chart") && name.ends_with(".xml")) {
            drop(f);
            zout.raw_copy_file(zin.by_index_raw(i).map_err(zip_err)?)
                .map_err(zip_err)?;
            continue;
        }
        let mut xml = String::new();
        f.read_to_string(&mut xml).map_err(zip_err)?;
        let hit = surfaces
            .iter()
            .position(|s| xml.contains(&format!("<a:t>{}</a:t>", s.key)));
        if let Some(k) = hit {
            found[k] = true;
            xml = chart_xml(&surfaces[k]);
        }
        zout.start_file(name.as_str(), opts).map_err(zip_err)?;
        zout.write_all(xml.as_bytes()).map_err(zip_err)?;
    }
    if let Some(k) = found.iter().position(|f| !f) {
        return Err(zip_err(format!(
            "no placeholder chart \"{}\" to replace",
            surfaces[k].key
        )));
    }
    Ok(zout.finish().map_err(zip_err)?.into_inner())
}
